package inbound

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestServerCacheFilesServersByTheKeysTheyAccept: the cache answers a key with the server it read for it while
// the server accepts that key — a replaced key only during its grace — forgets a server by ID under every key,
// lets a key that moved to another server go to that one, and drops servers unused for idleAfter.
func TestServerCacheFilesServersByTheKeysTheyAccept(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	old, until := "k-old", now.Add(time.Minute)
	a := &ent.Server{ID: 1, InboundKey: "k-a", PreviousInboundKey: &old, PreviousKeyExpiresAt: &until}
	b := &ent.Server{ID: 2, InboundKey: "k-b"}
	c := newServerCache()
	c.put(map[string]*ent.Server{"k-a": a, "k-old": a, "k-b": b}, map[int]string{1: "v1", 2: "v2"}, now)

	servers, versions, missing := c.get([]string{"k-a", "k-old", "k-b", "k-x"}, now)
	require.Equal(t, map[string]*ent.Server{"k-a": a, "k-old": a, "k-b": b}, servers)
	require.Equal(t, map[int]string{1: "v1", 2: "v2"}, versions)
	require.Equal(t, []string{"k-x"}, missing, "a key never read is read")

	_, _, missing = c.get([]string{"k-a", "k-old"}, until)
	require.Equal(t, []string{"k-old"}, missing, "a replaced key past its grace is read again, to be refused")

	c.forget([]int{1})
	_, _, missing = c.get([]string{"k-a", "k-old", "k-b"}, now)
	require.Equal(t, []string{"k-a", "k-old"}, missing, "a server forgotten is forgotten under each of its keys")

	moved := &ent.Server{ID: 3, InboundKey: "k-b"}
	c.put(map[string]*ent.Server{"k-b": moved}, map[int]string{3: "v3"}, now)
	servers, versions, _ = c.get([]string{"k-b"}, now)
	require.Same(t, moved, servers["k-b"])
	require.Equal(t, map[int]string{3: "v3"}, versions)
	require.NotContains(t, c.byServer, 2, "the server the key left is dropped")

	later := now.Add(idleAfter + time.Second)
	c.put(map[string]*ent.Server{"k-a": a}, map[int]string{1: "v1"}, later)
	_, _, missing = c.get([]string{"k-a"}, later.Add(time.Second))
	require.Empty(t, missing)
	require.Equal(t, map[int][]string{1: {"k-a"}}, c.byServer, "a server unused for idleAfter is dropped")
	require.Len(t, c.byKey, 1)
}

// TestServerVersionCoversWhatIntakeReads: every column intake reads of a server or a recipient (serversSQL) is
// part of the server's version, so the batch's statement sees any change to what intake used; and the version
// changes when a recipient is added, changed or deleted, and not when an attempt's outcome moves a recipient's
// health counters.
func TestServerVersionCoversWhatIntakeReads(t *testing.T) {
	dbtest.SkipUnlessPostgres(t)
	t.Parallel()
	read := regexp.MustCompile(`\b([sr])\.([a-z_]+)`).FindAllStringSubmatch(serversSQL[:strings.Index(serversSQL, "FROM")], -1)
	version := delivery.ServerVersionSQL("servers")
	for _, m := range read {
		col := m[2]
		if col == "version" {
			continue
		}
		want := "servers." + col
		if m[1] == "r" {
			want = "rv." + col
		}
		require.Contains(t, version, want, "intake reads %s.%s", m[1], col)
	}

	db, ctx := dbtest.OpenAsSystem(t)
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(3).SetMaxRecipientsPerServer(3).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey("k-v").Save(ctx)
	require.NoError(t, err)
	versionNow := func() string {
		_, versions, err := serversPostgres(ctx, db.Client, []string{"k-v"}, time.Now())
		require.NoError(t, err)
		require.Regexp(t, `^[0-9a-f]{32}$`, versions[srv.ID])
		return versions[srv.ID]
	}
	seen := []string{versionNow()}
	changes := []struct {
		what   string
		change func() error
		moves  bool
	}{
		{"a recipient added", func() error {
			_, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
				SetMethod(recipient.MethodDIRECT_HTTP).SetURL("https://example.test/a").Save(ctx)
			return err
		}, true},
		{"its URL changed", func() error {
			return db.Client.Recipient.Update().SetURL("https://example.test/b").Exec(ctx)
		}, true},
		{"its signing key rotated", func() error {
			return db.Client.Recipient.Update().SetSigningSecret([]byte("another-key-of-thirty-two-bytes!")).Exec(ctx)
		}, true},
		{"a CLI seen", func() error { return db.Client.Recipient.Update().SetCliSeenUntil(time.Now()).Exec(ctx) }, true},
		{"its health counters moved", func() error {
			return db.Client.Recipient.Update().SetConsecutiveFailures(4).SetWindowAttempts(9).Exec(ctx)
		}, false},
		{"the server's retention changed", func() error {
			return db.Client.Server.UpdateOneID(srv.ID).SetRetentionDays(1).Exec(ctx)
		}, true},
		{"the recipient deleted", func() error { return db.Client.Recipient.Update().SetDeletedAt(time.Now()).Exec(ctx) }, true},
	}
	for _, c := range changes {
		require.NoError(t, c.change(), c.what)
		v := versionNow()
		if !c.moves {
			require.Equal(t, seen[len(seen)-1], v, c.what)
			continue
		}
		require.False(t, slices.Contains(seen, v), "%s: the version changes", c.what)
		seen = append(seen, v)
	}
}
