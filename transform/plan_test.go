package transform

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/adal-relay/adal/internal/invoice"
	"github.com/dop251/goja"
)

// planInputs are requests a plan either answers for exactly as the engine would or leaves to it.
func planInputs() []Request {
	with := func(f func(*Request)) Request {
		r := sample()
		f(&r)
		return r
	}
	return []Request{
		sample(),
		with(func(r *Request) { r.Body = invoice.Body() }),
		with(func(r *Request) { r.Body = []byte(" \n{\"a\": [1, 2.50, \"\\u00e9\"]}\t ") }),
		with(func(r *Request) { r.Body = []byte("plain text, \"quoted\"\n"); r.Header.Del("Content-Type") }),
		with(func(r *Request) { r.Body = []byte("\xff\xfe{\"a\":1}") }),
		with(func(r *Request) { r.Body = []byte(`[1, 2]`) }),
		with(func(r *Request) { r.Body = []byte(`"a string"`) }),
		with(func(r *Request) { r.Body = nil }),
		with(func(r *Request) { r.Header = http.Header{"x-lower": {"a"}, "X-Lower": {"b"}, "Content-Type": {""}} }),
		with(func(r *Request) { r.Header.Set("X-Bad", "a\x01b") }),
		with(func(r *Request) { r.Method, r.Path, r.Query, r.Header = "GET", "/", "", nil }),
		with(func(r *Request) { r.Path, r.Query = "/caf\xe9", "?x=1" }),
		with(func(r *Request) {
			r.Body = []byte(` {"type" : "t", "id": "x\/y", "n": [1.0, 2.50, 1e2, -0, 0.1, 1e-7, 123456789012345678, 1e21, -0.0],` +
				` "s": "\u00e9\ud83d\ude00\ud800", "k\u00e9y": {"a": null, "b": [true, false, {}]}, "note": null} `)
		}),
		with(func(r *Request) {
			r.Body = []byte(`{"type":"t","n":[1.0, 2.50, 1e2, -0, 0.1, 123456789012345678, -0.0, 9007199254740993, 1.7976931348623157e20,` +
				` 3.14159, -12.5e-3, 1E+2, 0.30000000000000004], "s": "\u00e9\/\ud83d\ude00\ud800\u0001", "k\u00e9y": {"a": null, "b": [true, false, {}]}}`)
		}),
		with(func(r *Request) {
			r.Body = []byte(`{"type": "order.paid", "id": 7, "n": 2.5, "note": null, "paid": true, "k0": {"type": "inner"},` +
				` "items": [{"sku": "A", "qty": 2}, "x", 3], "customer": {"address": {"city": "Berlin"}}}`)
		}),
		with(func(r *Request) { r.Body = []byte(`{"type": "x", "type": "y"}`) }),
		with(func(r *Request) { r.Body = []byte(`{"1": "a", "type": "b"}`) }),
		with(func(r *Request) { r.Body = []byte(`{"type": "a", "big": 1e400}`) }),
		with(func(r *Request) {
			r.Body = []byte(`{"type": "a", "n": 0.000001, "m": 120000000000000000000, "e": 1E-2}`)
		}),
	}
}

// checkPlan runs every input through p's plan and through the engine and fails where the plan answered
// differently. It returns how many inputs the plan answered.
func checkPlan(t *testing.T, src string, p *Program) int {
	t.Helper()
	answered := 0
	for i, in := range planInputs() {
		got, gotCancel, ok := p.plan.run(in, Limits{}.withDefaults())
		if !ok {
			continue
		}
		answered++
		want, wantCancel, err := p.runEngine(context.Background(), in, roomy)
		switch {
		case err != nil:
			t.Errorf("%s\ninput %d: the plan answered, the engine failed: %v", src, i, err)
		case gotCancel != wantCancel:
			t.Errorf("%s\ninput %d: plan cancel %v, engine %v", src, i, gotCancel, wantCancel)
		case got.Method != want.Method || got.Path != want.Path || got.Query != want.Query:
			t.Errorf("%s\ninput %d: plan %q %q %q, engine %q %q %q", src, i, got.Method, got.Path, got.Query,
				want.Method, want.Path, want.Query)
		case !reflect.DeepEqual(got.Header, want.Header):
			t.Errorf("%s\ninput %d: plan headers %v, engine %v", src, i, got.Header, want.Header)
		case !bytes.Equal(got.Body, want.Body):
			t.Errorf("%s\ninput %d: plan body %q, engine %q", src, i, got.Body, want.Body)
		}
	}
	return answered
}

func TestPlanMatchesEngine(t *testing.T) {
	for _, src := range []string{
		passThrough,
		`function transform(r) { return r; }`,
		`function transform(r) { return null; }`,
		`function transform(request) {
			request.headers.authorization = "Bearer abc";
			delete request.headers["x-multi"];
			request.method = "PUT";
			request.path = "/v2" ;
			request.query = "?page=1";
			return request;
		}`,
		`function transform(r) { r.body = {event: "order.paid", n: -0, big: 1e20, neg: -12, hex: 0x10, ok: true, no: false,
			none: null, list: [1, "two", [r.method], {}], from: {method: r.method, path: r.path, query: r.query,
			multi: r.headers["x-multi"]}, esc: "q\"b\\s\n\t\r\b\f\u0001"}; return r; }`,
		`function transform(r) { r.body = [r.body, r.body]; r.headers["Content-Type"] = "text/plain"; return r; }`,
		`function transform(r) { r.body = "replaced"; return r; }`,
		`function transform(r) { r.body = r.path; r.path = r.query; return r; }`,
		`function transform(r) { delete r.body; r.headers["X-New"] = r.headers["content-type"]; return r; }`,
		`function transform(r) { r.body = 42; delete r.body; r.body = {again: r.body}; return r; }`,
		`function transform(r) { r.headers["X-Multi"] = "upper"; r.headers["x-multi"] = "lower"; return r; }`,
		`function transform(r) { r.body = {data: r.body}; r.body = {outer: r.body, at: r.path}; return r; }`,
		`function transform(r) { r.method = "bad method"; return r; }`,
		`function transform(r) { r.headers["x-missing-read"] = r.headers["x-none"]; return r; }`,
		`function transform(r) { r.headers.toString = "own"; r.headers["x-n"] = 1; return r; }`,
		`function transform(r) { r.headers["x-event"] = r.body.type; r.body = {data: r.body}; return r; }`,
		`function transform(r) { r.body = {id: r.body.id, items: r.body.items, city: r.body.customer.address.city, n: r.body.n}; return r; }`,
		`function transform(r) { r.headers.x = r.body["note"]; return r; }`,
		`function transform(r) { r.body = r.body.n; return r; }`,
		`function transform(r) { r.body = r.body.type; return r; }`,
		`function transform(r) { r.body = {orig: r.body, lit: {b: "x"}}; r.headers.h = r.body.lit.b; return r; }`,
		`function transform(r) { r.body = {a: r.body}; r.headers.h = r.body.a.type; return r; }`,
		`function transform(r) { r.body = {s: r.body.s, x: r.body.missing}; return r; }`,
		`function transform(r) { r.headers.x = r.body.items.length; return r; }`,
		`function transform(r) { r.headers.t = r.body.type; delete r.body; return r; }`,
		"function transform(r) { r.body = `t${r.path}`; return r; }",
		"function transform(r) { r.headers.authorization = `Bearer ${r.headers[\"x-multi\"]}`; r.path = \"/v2\" + r.path; return r; }",
		"function transform(r) { r.headers.x = `${r.body.type}:${r.body.id}:${r.body.n}:${r.body.note}:${r.body.paid}:${1}${-0}`; return r; }",
		`function transform(r) { r.headers.x = r.body.items[0]; r.headers.y = "n=" + r.body.items.length; return r; }`,
		`function transform(r) { r.headers.x = "" + r.body.items[0].qty + r.body.items[0].sku; return r; }`,
		`function transform(r) { r.headers.x = 1 + 2 + "3"; return r; }`,
		`function transform(r) { r.headers.x = "1" + 2 + 3; r.headers.y = r.body.id + "-" + r.body.n; return r; }`,
		`function transform(r) { r.body = {first: r.body.lines[0], count: r.body.lines.length, sku: r.body.lines[1].sku + "!"}; return r; }`,
		"function transform(r) { r.body = `${r.body}`; return r; }",
		"function transform(r) { r.headers.x = `${r.body.customer}`; return r; }",
		`function transform(r) { r.query = r.query + "&b=" + r.body.n; return r; }`,
	} {
		p := compile(t, src)
		if p.plan == nil {
			t.Errorf("no plan for %s", src)
			continue
		}
		checkPlan(t, src, p)
	}
}

// TestPlanAnswers makes sure the plan is used: with a JSON object body it answers for a plain transform.
func TestPlanAnswers(t *testing.T) {
	p := compile(t, passThrough)
	out, _, ok := p.plan.run(sample(), Limits{}.withDefaults())
	if !ok {
		t.Fatal("the plan left a JSON object body to the engine")
	}
	if want := `{"data":` + string(sample().Body) + `}`; string(out.Body) != want {
		t.Errorf("body = %s, want %s", out.Body, want)
	}
	if n := checkPlan(t, passThrough, p); n < len(planInputs())-3 {
		t.Errorf("the plan answered %d of %d inputs", n, len(planInputs()))
	}
}

// randomList is fewer than most items made by item, between open and close.
func randomList(rng *rand.Rand, most int, open, close string, item func(i int) string) string {
	parts := make([]string, rng.IntN(most))
	for i := range parts {
		parts[i] = item(i)
	}
	return open + strings.Join(parts, ", ") + close
}

// Random programs of the statements a plan covers, against the engine.
func TestPlanMatchesEngineRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{`"x-a"`, `"X-A"`, `"content-type"`, `"Content-Type"`, `"x-multi"`, `"authorization"`, `"bad name"`}
	strs := []string{`"PUT"`, `"/v2/x"`, `"?a=1&b"`, `""`, `"bad method"`, `"/bad#frag"`, `"no-slash"`, `"a\"b\\c\n\u0001"`, `"text/plain"`}
	var value func(depth int) string
	value = func(depth int) string {
		switch n := rng.IntN(12); {
		case n < 2:
			return strs[rng.IntN(len(strs))]
		case n < 3:
			return []string{"0", "-0", "17", "-3", "1e3", "true", "false", "null"}[rng.IntN(8)]
		case n < 5:
			return "r." + []string{"method", "path", "query", "body", "body"}[rng.IntN(5)]
		case n < 6:
			switch rng.IntN(4) {
			case 0:
				return "r.body." + []string{"type", "id", "note", "n", "k0", "k0.type", "customer.address", "items", "items[0]",
					"items.length", "lines[1].quantity", "n[0]"}[rng.IntN(12)]
			case 1:
				return value(depth+1) + " + " + value(depth+1)
			case 2:
				return "`a${" + value(depth+1) + "}b${" + value(depth+1) + "}`"
			}
			return "r.headers[" + keys[rng.IntN(len(keys))] + "]"
		case depth > 1:
			return `"leaf"`
		case n < 9:
			return randomList(rng, 4, "{", "}", func(i int) string { return fmt.Sprintf("k%d: %s", i, value(depth+1)) })
		default:
			return randomList(rng, 4, "[", "]", func(int) string { return value(depth + 1) })
		}
	}
	answered := 0
	for range 300 {
		var b strings.Builder
		b.WriteString("function transform(r) {\n")
		for range 1 + rng.IntN(5) {
			switch rng.IntN(7) {
			case 0, 1:
				fmt.Fprintf(&b, "r.headers[%s] = %s;\n", keys[rng.IntN(len(keys)-1)], value(0))
			case 2:
				fmt.Fprintf(&b, "delete r.headers[%s];\n", keys[rng.IntN(len(keys))])
			case 3:
				fmt.Fprintf(&b, "r.%s = %s;\n", []string{"method", "path", "query"}[rng.IntN(3)], value(1))
			case 4, 5:
				fmt.Fprintf(&b, "r.body = %s;\n", value(0))
			default:
				b.WriteString("delete r.body;\n")
			}
		}
		if rng.IntN(10) == 0 {
			b.WriteString("return null;\n}")
		} else {
			b.WriteString("return r;\n}")
		}
		src := b.String()
		p := compile(t, src)
		if p.plan == nil {
			t.Errorf("no plan for %s", src)
			continue
		}
		answered += checkPlan(t, src, p)
	}
	if answered < 600 {
		t.Errorf("the plans answered only %d runs", answered)
	}
}

// Sources outside what a plan covers go to the engine.
func TestPlanLeavesToEngine(t *testing.T) {
	for _, src := range []string{
		`function transform(r) { r.headers["x-n"] = String(1); return r; }`,
		`function transform(r) { r.body = {get data() { return 1; }}; return r; }`,
		`function transform(r) { r.body = {__proto__: null}; return r; }`,
		`function transform(r) { r.body = {"1": "a", b: 2}; return r; }`,
		`function transform(r) { r.body = {a: 1, a: 2}; return r; }`,
		`function transform(r) { r.body = {["a"]: 1}; return r; }`,
		`function transform(r) { r.body = {...r.body}; return r; }`,
		`function transform(r) { r.body = {r}; return r; }`,
		"function transform(r) { r.body = String.raw`t${r.path}`; return r; }",
		`function transform(r) { r.body = r.body.n - 1; return r; }`,
		`function transform(r) { r.headers.x = r.body.items[-1]; return r; }`,
		`function transform(r) { r.headers.x = r.body.items[1.5]; return r; }`,
		"function transform(r) { r.body = `caf\u00e9 ${r.path}`; return r; }",
		`function transform(r) { r.body = "caf\u00e9"; return r; }`,
		`function transform(r) { r.body = 1.5; return r; }`,
		`function transform(r) { r.body = [1, , 2]; return r; }`,
		`function transform(r) { r.body.x = 1; return r; }`,
		`function transform(r) { r.headers.x = r.body[r.path]; return r; }`,
		`function transform(r) { r.headers.x = r.body["k\u00e9y"]; return r; }`,
		`function transform(r) { r.headers.x = r.headers.a.b; return r; }`,
		`function transform(r) { r.headers["__proto__"] = "x"; return r; }`,
		`function transform(r) { r.headers["0"] = "x"; return r; }`,
		`function transform(r) { r.headers = {}; return r; }`,
		`function transform(r) { r.path += "/x"; return r; }`,
		`function transform(r) { delete r.method; return r; }`,
		`function transform(r) { var x = 1; return r; }`,
		`function transform(r) { 'use strict'; return r; }`,
		`function transform(r) { return r.body; }`,
		`function transform(r) { return {method: "GET"}; }`,
		`function transform(r) { r.body = r; return r; }`,
		`function transform(r, extra) { return r; }`,
		`function transform({body}) { return body; }`,
		`function transform(r = {}) { return r; }`,
		`var n = 0; function transform(r) { return r; }`,
		`const transform = function (r) { return r; };`,
		`function transform(r) { r.headers[r.path] = "x"; return r; }`,
		`function transform(r) { x.y = 1; return r; }`,
	} {
		if p := compile(t, src); p.plan != nil {
			t.Errorf("a plan for %s", src)
		}
	}
}

// A body returned with the request's body in it many times is held to the memory limit, by the plan and
// by the engine alike.
func TestRepeatedBodyHeldToMemoryLimit(t *testing.T) {
	src := "function transform(r) { r.body = [" + strings.Repeat("r.body,", 64) + "]; return r; }"
	in := sample()
	in.Body = []byte(`{"a":"` + strings.Repeat("x", 64<<10) + `"}`)
	p := compile(t, src)
	_, _, err := p.Run(context.Background(), in, Limits{Memory: 1 << 20})
	e, ok := err.(*Error)
	if !ok || e.Reason != ReasonMemory {
		t.Fatalf("Run error = %v, want a MEMORY error", err)
	}
	if out, _, err := p.Run(context.Background(), in, Limits{Memory: 16 << 20}); err != nil || len(out.Body) < 64*(64<<10) {
		t.Fatalf("with room: %d bytes, %v", len(out.Body), err)
	}
}

// Numbers in a body the plan reads are written as JavaScript writes them, or left to the engine.
func TestJSNumberMatchesEngine(t *testing.T) {
	vm := goja.New()
	roundTrip, err := vm.RunString(`(function (text) { return JSON.stringify(JSON.parse(text)); })`)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := goja.AssertFunction(roundTrip)
	rng := rand.New(rand.NewPCG(5, 6))
	texts := []string{"0", "-0", "0.0", "-0.0", "1", "-1", "1.0", "2.50", "1e2", "1E+2", "1e-2", "0.1", "123456789012345",
		"1234567890123456", "9007199254740993", "123456789012345678901", "1e21", "1e-6", "1e-7", "5e-324", "1.7976931348623157e308"}
	for range 3000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		f = math.Ldexp(math.Abs(f), 0)
		for _, g := range []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'e', 3, 64)} {
			texts = append(texts, g)
		}
		scaled := rng.Float64() * math.Pow(10, float64(rng.IntN(30)-10))
		texts = append(texts, strconv.FormatFloat(scaled, 'f', -1, 64), strconv.FormatFloat(-scaled, 'g', -1, 64),
			strconv.FormatFloat(math.Round(scaled), 'f', -1, 64))
	}
	answered := 0
	for _, text := range texts {
		integer := !strings.ContainsAny(text, ".eE")
		got, ok := jsNumber(text, integer)
		if !ok {
			continue
		}
		answered++
		want, err := fn(goja.Undefined(), vm.ToValue(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if got = jsonValue(got).written(); got != want.String() {
			t.Errorf("jsNumber(%s) = %s, JavaScript writes %s", text, got, want)
		}
	}
	if answered < len(texts)/3 {
		t.Errorf("jsNumber answered %d of %d", answered, len(texts))
	}
}

// A plan leaves a result that would outgrow the memory limit to the engine before building it, however
// fast the source makes it grow.
func TestPlanBoundsGrowth(t *testing.T) {
	for _, stmt := range []string{"r.body = [r.body, r.body];", "r.query = r.query + r.query;", "r.path = `${r.path}${r.path}`;"} {
		src := "function transform(r) { " + strings.Repeat(stmt, 60) + " return r; }"
		p := compile(t, src)
		if p.plan == nil {
			t.Fatalf("no plan for %s", stmt)
		}
		if _, _, ok := p.plan.run(sample(), Limits{}.withDefaults()); ok {
			t.Errorf("%s: the plan answered", stmt)
		}
		if _, _, err := p.Run(context.Background(), sample(), Limits{}); err == nil {
			t.Errorf("%s: the run succeeded", stmt)
		}
	}
}
