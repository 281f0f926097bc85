// Package search finds stored requests by text: a Term is what a user typed, Match is the SQL that tells
// whether a request's path, query, headers or body contain it, and Requests pages through a server's requests
// newest first with a bound on the rows it examines per call, so a search over a million stored requests
// answers in bounded time and says how far it got.
//
// No index serves it: an index over bodies would be written by every intake, the hottest path there is, for
// the sake of a search run now and then. A search walks the (server_id, received_at) index instead, which
// intake writes anyway.
package search

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
)

// Bounds of a search text, in characters. Fewer than three would match nearly everything and make every
// search walk its whole bound; the upper bound keeps a term a term.
const (
	MinTermLength = 3
	MaxTermLength = 256
)

// Term is a validated search text. Matching is by bytes, ASCII letters in either case: "Order" finds "ORDER"
// and "order"; any other character matches exactly as typed ("é" finds "é", not "É"). Bodies are bytes, not
// necessarily text: a body that is not UTF-8 is searched as it is, never refused, and a term finds the
// bytes of its UTF-8 encoding wherever they occur. Headers are stored as JSON, so they are matched against the
// term written as a JSON string would write it: names and values each, not "name: value".
type Term struct {
	text string // as typed
	// lower is the term with ASCII letters in lower case, json the same as the inside of a JSON string.
	lower, json []byte
}

// Parse validates s as a search term for operation op: INVALID_INPUT when it is shorter than MinTermLength
// or longer than MaxTermLength characters.
func Parse(op, s string) (Term, error) {
	n := utf8.RuneCountInString(s)
	if !utf8.ValidString(s) || n < MinTermLength || n > MaxTermLength {
		return Term{}, fault.E(op, fault.InvalidInput, "search must be %d to %d characters, got %d", MinTermLength, MaxTermLength, n)
	}
	quoted, err := json.Marshal(s)
	if err != nil {
		return Term{}, fault.Wrap(op, fault.Internal, err)
	}
	return Term{text: s, lower: lowerASCII([]byte(s)), json: lowerASCII(quoted[1 : len(quoted)-1])}, nil
}

// String is the term as typed.
func (t Term) String() string { return t.text }

func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = toLowerASCII(c)
	}
	return out
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Columns names the columns Match reads, as the statement qualifies them.
type Columns struct {
	Path, Query, Headers, Body string
}

// Match is the SQL predicate that holds when the request in cols contains t, cheapest columns first (each
// OR stops at the first that matches).
func (t Term) Match(dialect string, cols Columns) *entsql.Predicate {
	m := matchers.Of(dialect)
	return entsql.P(func(b *entsql.Builder) {
		b.WriteString("(")
		m.text(b, cols.Path, t.lower)
		b.WriteString(" OR ")
		m.text(b, cols.Query, t.lower)
		b.WriteString(" OR ")
		m.bytes(b, cols.Headers, t.json)
		b.WriteString(" OR ")
		m.bytes(b, cols.Body, t.lower)
		b.WriteString(")")
	})
}

// matcher writes "column contains term" for a text column and a bytes column, ASCII letters folded.
type matcher struct {
	text, bytes func(b *entsql.Builder, column string, lower []byte)
}

// matchers are each dialect's. PostgreSQL: lower() under the C collation folds ASCII letters only, whatever
// the database's locale; bytea has no lower(), so a body goes through its escape form (ASCII text, bytes
// above 0x7F and NUL written \ooo, backslashes doubled), is lowered there and decoded back to the same bytes
// with their letters folded, then searched as bytes: exact, and never an error on bytes that are not UTF-8.
// SQLite's lower() folds ASCII letters only and takes any bytes; instr() on blobs compares bytes.
var matchers = storage.PerDialect[matcher]{
	Postgres: matcher{
		text: func(b *entsql.Builder, column string, lower []byte) {
			if bytes.IndexByte(lower, 0) >= 0 {
				b.WriteString("FALSE") // text holds no NUL there, and refuses one as a parameter
				return
			}
			b.WriteString("strpos(lower(" + column + ` COLLATE "C"), `).Arg(string(lower)).WriteString(") > 0")
		},
		bytes: func(b *entsql.Builder, column string, lower []byte) {
			b.WriteString("position(").Arg(lower).WriteString("::bytea IN decode(lower(encode(" + column +
				`, 'escape') COLLATE "C"), 'escape')) > 0`)
		},
	},
	SQLite: matcher{
		text: func(b *entsql.Builder, column string, lower []byte) {
			b.WriteString("instr(CAST(lower(" + column + ") AS BLOB), ").Arg(lower).WriteString(") > 0")
		},
		bytes: func(b *entsql.Builder, column string, lower []byte) {
			b.WriteString("instr(CAST(lower(" + column + ") AS BLOB), ").Arg(lower).WriteString(") > 0")
		},
	},
}
