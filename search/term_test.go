package search_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/search"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

func TestParseBoundsTheTerm(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "ab", "é1", strings.Repeat("x", search.MaxTermLength+1), "a\xffb"} {
		_, err := search.Parse("op", s)
		require.Equal(t, fault.InvalidInput, fault.KindOf(err), "%q", s)
	}
	for _, s := range []string{"abc", "日本語", strings.Repeat("é", search.MaxTermLength)} {
		term, err := search.Parse("op", s)
		require.NoError(t, err, "%q", s)
		require.Equal(t, s, term.String())
	}
}

// probe is a stored request's searchable columns.
type probe struct {
	path, query string
	headers     http.Header
	body        []byte
}

// contains is the rule Match implements, spelled out in Go: the term's bytes, ASCII letters in either case,
// in the path, the query or the body; in the headers as their JSON writes the term.
func contains(p probe, term string) bool {
	fold := func(data []byte, t []byte) bool {
		return bytes.Contains(lowerASCII(data), lowerASCII(t))
	}
	headers, _ := json.Marshal(p.headers)
	quoted, _ := json.Marshal(term)
	return fold([]byte(p.path), []byte(term)) || fold([]byte(p.query), []byte(term)) ||
		fold(headers, quoted[1:len(quoted)-1]) || fold(p.body, []byte(term))
}

func lowerASCII(b []byte) []byte {
	return bytes.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, b)
}

var probeTable = storage.PerDialect[string]{
	Postgres: `CREATE TEMP TABLE probes (id integer, path text, query text, headers bytea, body bytea)`,
	SQLite:   `CREATE TEMP TABLE probes (id integer, path text, query text, headers blob, body blob)`,
}

// TestMatchConformance holds the SQL of Match, on the database under test, to the rule in contains: fixed cases
// for what users expect (either case of ASCII letters, other characters exact, bodies that are not UTF-8, NUL
// bytes, backslashes next to what the escape form writes, LIKE's wildcards taken literally, header values
// with characters JSON escapes) and random bytes.
func TestMatchConformance(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := t.Context()
	conn, err := db.SQL.Conn(ctx) // temporary tables live in one connection
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, probeTable.For(db.DB))
	require.NoError(t, err)

	probes := []probe{
		{path: "/Orders/42", query: "a=1&B=2"},
		{body: []byte(`{"event":"ORDER.created","name":"José"}`)},
		{body: []byte("plain \x00 nul and \xff\xfe not utf-8 ÉCOLE")},
		{body: []byte(`back\slash \303 literal`)},
		{body: []byte("\\\xc3\x83")},
		{body: []byte("100% of a_b")},
		{headers: http.Header{"Content-Type": {`text/html; charset="utf-8"`}, "X-Sig": {"<tag>&amp"}}},
		{path: "/é/É", query: "q=%C3%A9"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("aAbB\\\x00\xc3\x83\xff%_\"<3")
	for range 200 {
		b := make([]byte, 12)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		probes = append(probes, probe{body: b})
	}
	for i, p := range probes {
		headers, err := json.Marshal(p.headers)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, storage.Numbered(`INSERT INTO probes VALUES ($1, $2, $3, $4, $5)`).For(db.DB),
			i, p.path, p.query, headers, p.body)
		require.NoError(t, err)
	}

	terms := []string{"order", "ORDERS/4", "b=2", "josé", "JOSÉ", "école", "ÉCOLE", "\x00 n", "not utf", "\\303",
		"\\sla", "\\Ãx", "% of", "a_b", "_b\"", "charset=\"utf", "<tag>&", "TEXT/HTML", "/é/", "%c3%A9", "É/É"}
	for range 100 {
		b := make([]byte, 3)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if s := string(b); strings.ToValidUTF8(s, "") == s {
			terms = append(terms, s)
		}
	}
	for _, text := range terms {
		term, err := search.Parse("test", text)
		require.NoError(t, err, "%q", text)
		sel := entsql.Dialect(db.Dialect).Select("id").From(entsql.Table("probes")).
			Where(term.Match(db.Dialect, search.Columns{Path: "path", Query: "query", Headers: "headers", Body: "body"}))
		query, args := sel.Query()
		rows, err := conn.QueryContext(ctx, query, args...)
		require.NoError(t, err, "%q: %s", text, query)
		got := map[int]bool{}
		for rows.Next() {
			var id int
			require.NoError(t, rows.Scan(&id))
			got[id] = true
		}
		require.NoError(t, rows.Err())
		rows.Close()
		for i, p := range probes {
			require.Equal(t, contains(p, text), got[i], "term %q, probe %d %+v", text, i, p)
		}
	}
}
