package retention_test

import (
	"testing"
	"time"
)

func TestZZFmt(t *testing.T) {
	b := setup(t)
	b.fx.requests(t, b.ctx, 1, time.Now())
	var s any
	if err := b.db.SQL.QueryRow(`SELECT expires_at FROM requests`).Scan(&s); err != nil { t.Fatal(err) }
	var typ string
	b.db.SQL.QueryRow(`SELECT typeof(expires_at) FROM requests`).Scan(&typ)
	t.Logf("%T %v %s", s, s, typ)
	var raw string
	b.db.SQL.QueryRow(`SELECT CAST(expires_at AS TEXT) FROM requests`).Scan(&raw)
	t.Logf("raw %q", raw)
}
