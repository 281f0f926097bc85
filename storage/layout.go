package storage

import (
	"slices"

	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"entgo.io/ent/dialect/sql/schema"
)

// The PostgreSQL layout adds two things to the tables ent describes, which ent cannot express and the
// migrations write by hand:
//
//   - The request history (PartitionedTables) is partitioned by range of expiry (PartitionKey), one partition
//     per UTC day (EnsurePartitions), so that the purge drops a wholly expired day (DropExpiredPartitions)
//     instead of deleting its rows beside intake. A partitioned table's primary key and unique indexes must
//     hold its partition key, and its id is drawn from a plain sequence: PostgreSQL allows no identity column
//     on a partitioned table.
//   - Every table of a tenant's rows (all but ReferenceTables and tenants itself) has tenant_id in its primary
//     key, in its unique indexes and in the foreign keys between such tables, so that a sharding engine can
//     distribute them by tenant and co-locate each tenant's rows (Citus' create_distributed_table with
//     tenant_id). The primary key starts with id: Adal finds rows by id alone.
//
// SQLite keeps ent's tables as they are.

// PartitionedTables are the tables partitioned by expiry on PostgreSQL, parents before children: a partition
// of each is created and dropped together.
var PartitionedTables = []string{"requests", "deliveries", "attempts"}

// PartitionKey is the column the history is partitioned by: the request's expiry, copied onto its deliveries
// and attempts.
const PartitionKey = "expires_at"

// ReferenceTables are the tables that hold no tenant's rows, or not only one tenant's: plans (every tenant's
// catalogue), tokens (operators' tokens have no tenant), sign-in codes (the operator's), and the
// bookkeeping of migrations and secrets. A sharded cluster keeps them whole on every node. tenants is the
// table the others are distributed with, by its id.
var ReferenceTables = []string{"plans", "tokens", "sign_in_codes", "goose_db_version", "adal_secrets"}

// TenantColumn is the column every table of a tenant's rows carries.
const TenantColumn = "tenant_id"

// PostgresTables returns the schema's tables as PostgreSQL holds them: Tables with the tenant in every key of
// a tenant's table, and the partition key in the keys of the partitioned ones. The partitioning itself, and the
// ids' sequences, are Atlas attributes: PostgresDiffHook adds them.
func PostgresTables() []*schema.Table {
	tables := Tables()
	for i, t := range tables {
		if !tenantOwned(t) {
			continue
		}
		c := *t
		keys := []string{TenantColumn}
		if partitioned(t.Name) {
			keys = append(keys, PartitionKey)
		}
		c.PrimaryKey = withColumns(t, t.PrimaryKey, keys)
		c.Indexes = make([]*schema.Index, len(t.Indexes))
		for k, idx := range t.Indexes {
			c.Indexes[k] = idx
			if idx.Unique {
				x := *idx
				x.Columns = withColumns(t, idx.Columns, keys)
				c.Indexes[k] = &x
			}
		}
		c.ForeignKeys = make([]*schema.ForeignKey, len(t.ForeignKeys))
		for k, fk := range t.ForeignKeys {
			c.ForeignKeys[k] = fk
			if fk.RefTable != nil && tenantOwned(fk.RefTable) {
				x := *fk
				x.Columns = withColumns(t, fk.Columns, []string{TenantColumn})
				x.RefColumns = withColumns(fk.RefTable, fk.RefColumns, []string{TenantColumn})
				c.ForeignKeys[k] = &x
			}
		}
		tables[i] = &c
	}
	return tables
}

// PostgresDiffHook makes the partitioned tables of the desired schema what the migrations made them:
// partitioned by range of PartitionKey, their id a bigserial of their own sequence rather than an identity.
func PostgresDiffHook(next schema.Differ) schema.Differ {
	return schema.DiffFunc(func(current, desired *atlas.Schema) ([]atlas.Change, error) {
		for _, name := range PartitionedTables {
			t, ok := desired.Table(name)
			if !ok {
				continue
			}
			key, ok := t.Column(PartitionKey)
			if !ok {
				continue
			}
			t.AddAttrs(&postgres.Partition{T: postgres.PartitionTypeRange, Parts: []*postgres.PartitionPart{{C: key}}})
			if id, ok := t.Column("id"); ok {
				id.Type.Type = &postgres.SerialType{T: postgres.TypeBigSerial, SequenceName: name + "_id_seq"}
				id.Type.Raw = postgres.TypeBigSerial
				id.Attrs = slices.DeleteFunc(slices.Clone(id.Attrs), func(a atlas.Attr) bool {
					_, identity := a.(*postgres.Identity)
					return identity
				})
			}
		}
		return next.Diff(current, desired)
	})
}

func partitioned(table string) bool { return slices.Contains(PartitionedTables, table) }

// tenantOwned reports whether t holds one tenant's rows per row, keyed by TenantColumn.
func tenantOwned(t *schema.Table) bool {
	if slices.Contains(ReferenceTables, t.Name) || t.Name == "tenants" {
		return false
	}
	_, ok := t.Column(TenantColumn)
	return ok
}

// withColumns returns cols followed by those of names (columns of t) it lacks.
func withColumns(t *schema.Table, cols []*schema.Column, names []string) []*schema.Column {
	out := slices.Clone(cols)
	for _, name := range names {
		if slices.ContainsFunc(out, func(c *schema.Column) bool { return c.Name == name }) {
			continue
		}
		if c, ok := t.Column(name); ok {
			out = append(out, c)
		}
	}
	return out
}
