package billing

import "github.com/adal-relay/adal/alert"

// Intake on PostgreSQL grants and debits credits inside the one statement that stores a batch, so the rules
// of Reserve and Settle also exist as SQL. They are written here, beside their Go form, and the statement is
// assembled from them: no other package writes a balance or a ledger entry, in Go or in SQL.
// TestCreditsConformance holds the two forms to each other.

// Granted says whether the rank-th item (from 1, in arrival order) that a tenant's batch wants is granted
// against the balance the tenant had before the batch: items are paid for in order, as far as it goes.
func Granted(rank int, balance int64) bool { return int64(rank) <= balance }

// BalanceAfter is the balance that the ledger entry of the rank-th item granted records.
func BalanceAfter(balance int64, rank int) int64 { return balance - int64(rank) }

// GrantedSQL is Granted of the SQL expressions rank and balance.
func GrantedSQL(rank, balance string) string { return rank + " <= " + balance }

// BalanceAfterSQL is BalanceAfter of the SQL expressions balance and rank.
func BalanceAfterSQL(balance, rank string) string { return balance + " - " + rank }

// CrossedLow says whether a debit that took a balance from before to after crossed the tenant's low-credit
// threshold (nil: none), which raises a credits.low alert: once per crossing, as the debits of a tenant are
// serialised on its row and each sees the balance it starts from.
func CrossedLow(before, after int64, threshold *int64) bool {
	return threshold != nil && before >= *threshold && after < *threshold
}

// CrossedLowSQL is CrossedLow of the SQL expressions before, after and threshold.
func CrossedLowSQL(before, after, threshold string) string {
	return threshold + ` IS NOT NULL AND ` + before + ` >= ` + threshold + ` AND ` + after + ` < ` + threshold
}

// LockTenantsSQL is the query by which Reserve locks tenants on PostgreSQL, for the tenants whose ids the SQL
// array expression ids holds: in id order, NO KEY UPDATE (see lockTenants), reading columns id,
// credit_balance, retention_days (of the tenant's plan) and low_credit_threshold.
func LockTenantsSQL(ids string) string {
	return `
	SELECT t.id, t.credit_balance, p.retention_days, t.low_credit_threshold
	FROM tenants AS t JOIN plans AS p ON p.id = t.plan_id
	WHERE t.id = ANY(` + ids + `)
	ORDER BY t.id
	FOR NO KEY UPDATE OF t`
}

// DebitItems is Settle on PostgreSQL as data-modifying CTEs, for a statement that grants items and debits
// them at once: Entries inserts one ledger entry of one credit per row of From, in Order, Debits takes from
// each tenant's balance the number of rows Granted holds for it, and Alerts records a credits.low event for
// each tenant whose debit crossed its threshold (CrossedLow). Each outputs one row per row it wrote;
// PostgreSQL runs them to completion whether or not the outer query reads them.
// The fields other than the names are SQL expressions over From's rows (Reason and CreatedAt: the same for
// all); the tenants must be locked already (LockTenantsSQL), so the balances the entries record hold.
type DebitItems struct {
	Entries, Debits, Alerts string // the CTEs' names
	From                    string // the relation of the items debited
	Tenant                  string
	BalanceAfter            string // BalanceAfterSQL of the balance under the lock and the item's rank
	Reference               string
	Order                   string
	Reason                  string
	CreatedAt               string
	Granted                 string // a relation with a column tenant_id, one row per item debited
}

// SQL renders the CTEs, "Entries AS (…), Debits AS (…), Alerts AS (…)", to follow a WITH list's comma.
func (d DebitItems) SQL() string {
	return d.Entries + ` AS (
	INSERT INTO ledger_entries (tenant_id, created_at, reason, amount, balance_after, reference)
	SELECT ` + d.Tenant + `, ` + d.CreatedAt + `, ` + d.Reason + `, -1, ` + d.BalanceAfter + `, ` + d.Reference + `
	FROM ` + d.From + `
	ORDER BY ` + d.Order + `
	RETURNING 1
), ` + d.Debits + ` AS (
	UPDATE tenants AS t SET credit_balance = t.credit_balance - c.n
	FROM (SELECT tenant_id, count(*) AS n FROM ` + d.Granted + ` GROUP BY tenant_id) AS c
	WHERE t.id = c.tenant_id
	RETURNING t.id, t.credit_balance + c.n AS before, t.credit_balance AS after, t.low_credit_threshold
), ` + d.Alerts + ` AS (
	` + alert.InsertFromSQL(`SELECT id AS tenant_id, '`+string(alert.CreditsLow)+`' AS type, NULL::bigint AS recipient_id,
		convert_to(json_build_object('balance', after, 'threshold', low_credit_threshold)::text, 'UTF8') AS data,
		`+d.CreatedAt+` AS occurred_at
	FROM `+d.Debits+` WHERE `+CrossedLowSQL("before", "after", "low_credit_threshold")) + `
)`
}
