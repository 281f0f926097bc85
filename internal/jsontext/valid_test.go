package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/adal-relay/adal/internal/invoice"
)

func validReference(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }

var jsonSeeds = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, -2.5e+3, "x\"\\\/\b\f\n\r\t\u00e9", true, false, null, {}]} `,
	`{"a":1,}`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{1:2}`, `01`, `-`, `-0`, `1.`, `.5`, `1e`, `1e+`, `1E-7`,
	`"\u12g4"`, `"\x"`, "\"a\x01\"", "\"caf\xc3\xa9\"", "\"\xff\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"",
	`tru`, `true false`, `nul`, `[1 2]`, `{"a":1 "b":2}`, `"unterminated`, `"abcdefghijklmnop"`,
	"\ufeff{}", `[[[]]]`, `[{"a":[{"b":{}}]}]`, `{"a":{"b":[1,{"c":null}]},"d":"e"}`, `}`, `]`, `[}`, `{]`,
	"\xff", "[\"a\"]\xff", `"\ud800"`, `123abc`, "\t\r\n 5 \t\r\n",
}

func TestValid(t *testing.T) {
	seeds := append([]string{string(invoice.Body())}, jsonSeeds...)
	for _, s := range seeds {
		if got, want := Valid([]byte(s)), validReference([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
	for _, depth := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		for _, s := range []string{
			strings.Repeat("[", depth) + strings.Repeat("]", depth),
			strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1),
			strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth),
		} {
			if got, want := Valid([]byte(s)), validReference([]byte(s)); got != want {
				t.Errorf("depth %d, %.12s…: Valid = %v, want %v", depth, s, got, want)
			}
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), validReference(b); got != want {
			t.Errorf("Valid(%q) = %v, want %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	body := invoice.Body()
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			Valid(body)
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			validReference(body)
		}
	})
}
