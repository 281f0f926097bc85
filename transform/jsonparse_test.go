package transform

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/adal-relay/adal/internal/invoice"
)

// describeSource returns the body as a text that tells apart everything a transform could see of it: types,
// keys in order, property attributes, prototypes, -0.
const describeSource = `function d(v) {
	if (v === null || typeof v !== 'object') return typeof v + ':' + String(v) + (Object.is(v, -0) ? '(-0)' : '');
	var proto = Object.getPrototypeOf(v) === Object.prototype ? 'O' : Object.getPrototypeOf(v) === Array.prototype ? 'A' : '?';
	return proto + (Object.isExtensible(v) ? '' : '!') + '{' + Reflect.ownKeys(v).map(function (k) {
		var p = Object.getOwnPropertyDescriptor(v, k);
		return String(k) + (p.writable ? 'w' : '') + (p.enumerable ? 'e' : '') + (p.configurable ? 'c' : '') + '=' + d(p.value);
	}).join(',') + '}';
}
function transform(r) { r.body = d(r.body) + ' ' + JSON.stringify(r.body); return r; }`

// describeBody runs describeSource on body, parsing it up front, by parseJSON or by JSON.parse alone.
func describeBody(t *testing.T, body []byte, fast bool) string {
	t.Helper()
	in := sample()
	in.Body = body
	res, _ := runOnSandbox(t, describeSource, in, func(s *sandbox) { s.lazy, s.noParse = false, !fast })
	if res.err != nil {
		t.Fatalf("%s: %v", body, res.err)
	}
	return string(res.out.Body)
}

func TestParseJSONMatchesJSONParse(t *testing.T) {
	bodies := []string{
		string(invoice.Body()), string(sample().Body), `{}`, `[]`, `[[],{}]`, ` {"a" : [ 1 , 2 ] } `, `"str"`, `true`, `null`, `-0`,
		`[0, -0, 1, -1, 1.5, 1e2, 1E-7, 2.50, 1e308, 5e-324, 9007199254740993, 123456789012345678901234567890, 0.1]`,
		`{"s": "q\"b\\s\/\n\t\r\b\f\u0001 \u00e9 \ud83d\ude00 \ud800 \udc00x caf` + "\u00e9 \u2028" + `"}`,
		`{"a": 1, "a": 2}`, `{"__proto__": {"x": 1}}`, `{"1": "a", "b": 2, "0": "c"}`, `{"": 1}`, `[1e400]`, `{"n": -1e999}`,
		`{"constructor": 1, "toString": "x", "hasOwnProperty": null, "valueOf": []}`,
		strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 300),
		strings.Repeat(`[`, 200) + strings.Repeat("]", 200),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var gen func(depth int) string
	gen = func(depth int) string {
		switch n := rng.IntN(10); {
		case n < 2 || depth > 4:
			return []string{`"x"`, `""`, `"\u00e9\n"`, `12`, `-3.25`, `true`, `false`, `null`, `1e21`, `0.000001`}[rng.IntN(10)]
		case n < 6:
			return randomList(rng, 5, "{", "}", func(int) string {
				return fmt.Sprintf(`"%s":%s`, []string{"a", "b", "k", "id", "type", "x y"}[rng.IntN(6)], gen(depth+1))
			})
		default:
			return randomList(rng, 5, "[", "]", func(int) string { return gen(depth + 1) })
		}
	}
	for range 200 {
		bodies = append(bodies, gen(0))
	}
	sb, err := newSandbox(Limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	parsed := 0
	for _, b := range bodies {
		if _, ok := sb.parseJSON([]byte(b)); ok {
			parsed++
		}
	}
	if parsed < len(bodies)/2 {
		t.Errorf("parseJSON built %d of %d bodies", parsed, len(bodies))
	}
	for _, b := range bodies {
		if got, want := describeBody(t, []byte(b), true), describeBody(t, []byte(b), false); got != want {
			t.Errorf("%.80s:\nparseJSON  %.300s\nJSON.parse %.300s", b, got, want)
		}
	}
}
