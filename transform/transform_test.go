package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adal-relay/adal/internal/invoice"
)

func compile(t testing.TB, src string) *Program {
	t.Helper()
	p, err := Compile(src)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func sample() Request {
	return Request{
		Method: "POST",
		Path:   "/orders/7",
		Query:  "a=1&b=2",
		Header: http.Header{
			"Content-Type": {"application/json"},
			"X-Multi":      {"one", "two"},
		},
		Body: []byte(`{"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null}`),
	}
}

// roomy limits keep tests that are not about limits from failing on a slow
// or busy machine (the race detector makes goja several times slower).
var roomy = Limits{CPU: 10 * time.Second}

func run(t testing.TB, src string, in Request) (Request, bool, error) {
	t.Helper()
	return compile(t, src).Run(context.Background(), in, roomy)
}

func runErr(t *testing.T, src string, in Request, lim Limits) *Error {
	t.Helper()
	_, _, err := compile(t, src).Run(context.Background(), in, lim)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Run error = %v (%T), want *Error", err, err)
	}
	return e
}

// eval runs an expression inside transform and returns the JSON of its
// value, to look at the sandbox from inside.
func eval(t *testing.T, expr string) string {
	t.Helper()
	src := "function transform(r) { r.body = {v: (" + expr + ")}; return r; }"
	out, _, err := run(t, src, sample())
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	var v struct{ V json.RawMessage }
	if err := json.Unmarshal(out.Body, &v); err != nil {
		t.Fatalf("%s: body %s: %v", expr, out.Body, err)
	}
	return string(v.V)
}

func TestCompileSyntaxError(t *testing.T) {
	_, err := Compile("function transform(r) {\n  return r +;\n}")
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want *SyntaxError", err, err)
	}
	if se.Line != 2 || se.Column != 13 {
		t.Errorf("position = %d:%d, want 2:13 (%v)", se.Line, se.Column, se)
	}
	if se.Message == "" || !strings.Contains(se.Error(), "line 2, column 13") {
		t.Errorf("error = %q", se.Error())
	}

	// Caught by the compiler rather than the parser.
	_, err = Compile("function transform(r) { return r; }\nlet x = 1;\nlet x = 2;")
	if !errors.As(err, &se) || se.Line != 3 {
		t.Errorf("redeclaration: err = %v, want a *SyntaxError on line 3", err)
	}
}

func TestCompileNeedsTransform(t *testing.T) {
	for _, src := range []string{
		"",
		"function other(r) { return r; }",
		"var transformer = function (r) { return r; };",
		"function f() { function transform(r) { return r; } }",
	} {
		_, err := Compile(src)
		if err == nil || !strings.Contains(err.Error(), "no function named transform") {
			t.Errorf("%q: err = %v, want one naming the missing transform", src, err)
		}
	}
	for _, src := range []string{
		"async function transform(r) { return r; }",
		"const transform = async (r) => r;",
		"function* transform(r) { yield r; }",
		"class transform {}",
	} {
		if _, err := Compile(src); err == nil {
			t.Errorf("%q compiled", src)
		}
	}
	for _, src := range []string{
		"function transform(r) { return r; }",
		"const transform = (r) => r;",
		"let transform = function (r) { return r; };",
		"var transform; transform = function (r) { return r; };",
	} {
		if _, err := Compile(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestCompileTooLarge(t *testing.T) {
	src := "function transform(r) { return r; }\n//" + strings.Repeat("x", MaxSource)
	if _, err := Compile(src); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("err = %v, want the source refused for its size", err)
	}
}

func TestIdentity(t *testing.T) {
	in := sample()
	out, cancel, err := run(t, "function transform(request) { return request; }", in)
	if err != nil || cancel {
		t.Fatalf("Run = %v, cancel %v", err, cancel)
	}
	if out.Method != in.Method || out.Path != in.Path || out.Query != in.Query {
		t.Errorf("out = %+v", out)
	}
	// The function did not look into the body: it keeps its bytes.
	if got, want := string(out.Body), string(in.Body); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	if got := out.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := out.Header.Values("X-Multi"); len(got) != 1 || got[0] != "one, two" {
		t.Errorf("X-Multi = %q, want the values joined", got)
	}
	if in.Header.Get("X-Multi") != "one" {
		t.Error("the input headers changed")
	}
}

// The body is parsed when the function first looks into it, and from then on behaves as the parsed object in
// every way a function may use it; where it is returned untouched, its bytes are spliced in.
func TestLazyBodyBehavesAsParsed(t *testing.T) {
	in := sample() // {"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null}
	for _, c := range []struct{ name, src, want string }{
		{"read", `r.body = {id: r.body.id, n: r.body.items.length}`, `{"id":7,"n":1}`},
		{"changed", `r.body.paid = false; delete r.body.note`, `{"id":7,"items":[{"sku":"A","qty":2}],"paid":false}`},
		{"keys", `r.body = Object.keys(r.body).join()`, `id,items,paid,note`},
		{"entries", `r.body = {e: Object.entries(r.body).length, s: JSON.stringify(r.body)}`,
			`{"e":4,"s":"{\"id\":7,\"items\":[{\"sku\":\"A\",\"qty\":2}],\"paid\":true,\"note\":null}"}`},
		{"spread", `r.body = {...r.body, extra: 1}`, `{"id":7,"items":[{"sku":"A","qty":2}],"paid":true,"note":null,"extra":1}`},
		{"in and own", `r.body = ['id' in r.body, r.body.hasOwnProperty('x'), 'toString' in r.body]`, `[true,false,true]`},
		{"for in", `var k = []; for (var x in r.body) k.push(x); r.body = k`, `["id","items","paid","note"]`},
		{"frozen", `Object.freeze(r.body); r.body = [Object.isFrozen(r.body), (function () { 'use strict'; try { r.body.id = 1; return 'set'; } catch (e) { return e.name; } })()]`,
			`[true,"TypeError"]`},
		{"prototype", `r.body = [Object.getPrototypeOf(r.body) === Object.prototype, r.body instanceof Object, typeof r.body, Array.isArray(r.body)]`,
			`[true,true,"object",false]`},
		{"getter this", `var b = r.body; Object.defineProperty(b, 'twice', {get: function () { return this.id * 2; }, enumerable: true, configurable: true}); r.body = {t: b.twice}`,
			`{"t":14}`},
		{"twice untouched", `r.body = {a: r.body, b: [r.body]}`,
			`{"a":{"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null},"b":[{"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null}]}`},
		{"toJSON is not the body's", `r.body = {t: typeof r.body.toJSON}`, `{"t":"undefined"}`},
		{"stringified by a getter while serialized", `var b = r.body; r.body = {get s() { return JSON.stringify(b); }}`,
			`{"s":"{\"id\":7,\"items\":[{\"sku\":\"A\",\"qty\":2}],\"paid\":true,\"note\":null}"}`},
		{"touched by a getter while serialized", `var b = r.body; r.body = {first: b, get second() { b.id = 8; return b; }}`,
			`{"first":{"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null},"second":{"id":8,"items":[{"sku":"A","qty":2}],"paid":true,"note":null}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _, err := run(t, "function transform(r) { "+c.src+"; return r; }", in)
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Body) != c.want {
				t.Errorf("body = %s\nwant   %s", out.Body, c.want)
			}
		})
	}
}

// A body kept by a run in a global is its own: a later run's body does not change what it reads.
func TestLazyBodyKeptAcrossRuns(t *testing.T) {
	p := compile(t, `var kept; function transform(r) {
		var first = kept === undefined;
		if (first) kept = r.body;
		r.body = {kept: kept.n, now: r.body.n, first: first};
		return r;
	}`)
	ctx := context.Background()
	var saw []string
	for n := range 3 {
		in := Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(fmt.Sprintf(`{"n":%d}`, n))}
		out, _, err := p.Run(ctx, in, roomy)
		if err != nil {
			t.Fatal(err)
		}
		saw = append(saw, string(out.Body))
	}
	// Runtimes are reused but not promised: a run may see a global left by an earlier one, or not. Whatever
	// it sees must be that earlier body, not the current one.
	for n, got := range saw {
		var b struct {
			Kept, Now int
			First     bool
		}
		if err := json.Unmarshal([]byte(got), &b); err != nil {
			t.Fatal(err)
		}
		if b.Now != n || (b.First && b.Kept != n) || (!b.First && b.Kept >= n) {
			t.Errorf("run %d: %s", n, got)
		}
	}
}

func TestDeletedBodyKeepsBytes(t *testing.T) {
	in := sample()
	out, _, err := run(t, "function transform(r) { delete r.body; r.method = 'PUT'; return r; }", in)
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Body) != string(in.Body) || out.Method != "PUT" {
		t.Errorf("out = %s %s", out.Method, out.Body)
	}
}

func TestRequestFields(t *testing.T) {
	src := `function transform(r) {
		return {body: {method: r.method, path: r.path, query: r.query, headers: r.headers, body: r.body}};
	}`
	out, _, err := run(t, src, sample())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"method":"POST","path":"/orders/7","query":"a=1&b=2",` +
		`"headers":{"content-type":"application/json","x-multi":"one, two"},` +
		`"body":{"id": 7, "items": [{"sku": "A", "qty": 2}], "paid": true, "note": null}}`
	if string(out.Body) != want {
		t.Errorf("body = %s\nwant   %s", out.Body, want)
	}
	// Fields missing from the returned object keep their input value.
	if out.Method != "POST" || out.Path != "/orders/7" || out.Query != "a=1&b=2" || out.Header.Get("X-Multi") != "one" {
		t.Errorf("out = %+v", out)
	}
}

func TestChanges(t *testing.T) {
	src := `function transform(r) {
		r.method = 'PUT';
		r.path = '/v2' + r.path;
		r.query = '?' + r.query + '&c=3';
		r.headers = {'x-tenant': 'acme', 'X-Tags': ['a', 'b'], authorization: 'Bearer t'};
		r.body.items.push({sku: 'B', qty: 1});
		r.body.total = r.body.items.reduce(function (n, i) { return n + i.qty; }, 0);
		return r;
	}`
	out, cancel, err := run(t, src, sample())
	if err != nil || cancel {
		t.Fatalf("Run = %v, cancel %v", err, cancel)
	}
	if out.Method != "PUT" || out.Path != "/v2/orders/7" || out.Query != "a=1&b=2&c=3" {
		t.Errorf("out = %s %s ? %s", out.Method, out.Path, out.Query)
	}
	want := http.Header{
		"X-Tenant":      {"acme"},
		"X-Tags":        {"a", "b"},
		"Authorization": {"Bearer t"},
		"Content-Type":  {"application/json"}, // added: the body is JSON and the headers had none
	}
	if fmt.Sprint(out.Header) != fmt.Sprint(want) {
		t.Errorf("headers = %v, want %v", out.Header, want)
	}
	if got := string(out.Body); got != `{"id":7,"items":[{"sku":"A","qty":2},{"sku":"B","qty":1}],"paid":true,"note":null,"total":3}` {
		t.Errorf("body = %s", got)
	}
}

func TestNewObjectAndContentType(t *testing.T) {
	src := `function transform(r) {
		return {method: 'GET', headers: {'content-type': 'text/x-custom'}, body: [1, 'two']};
	}`
	out, _, err := run(t, src, sample())
	if err != nil {
		t.Fatal(err)
	}
	if out.Header.Get("Content-Type") != "text/x-custom" || string(out.Body) != `[1,"two"]` || out.Method != "GET" {
		t.Errorf("out = %+v %s", out.Header, out.Body)
	}
}

func TestStringBody(t *testing.T) {
	in := Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte("a=1&b=\xff")}
	src := `function transform(r) {
		if (typeof r.body !== 'string') throw new Error('body is ' + typeof r.body);
		r.body = r.body.toUpperCase() + ' ✓';
		return r;
	}`
	out, _, err := run(t, src, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Body); got != "A=1&B=\uFFFD ✓" {
		t.Errorf("body = %q", got)
	}
	if out.Header.Get("Content-Type") != "" {
		t.Errorf("Content-Type = %q, want none for a string body", out.Header.Get("Content-Type"))
	}

	// Valid JSON is parsed whatever the content type; a JSON string body
	// returned as a string is sent as is.
	in.Body = []byte(`"quoted"`)
	out, _, err = run(t, "function transform(r) { r.body = r.body + '!'; return r; }", in)
	if err != nil || string(out.Body) != "quoted!" {
		t.Errorf("body = %q, err %v", out.Body, err)
	}
}

func TestNullCancels(t *testing.T) {
	out, cancel, err := run(t, "function transform(r) { if (r.body.paid) return null; return r; }", sample())
	if err != nil || !cancel {
		t.Fatalf("cancel = %v, err = %v, want a cancelled delivery", cancel, err)
	}
	if out.Method != "" {
		t.Errorf("out = %+v, want zero", out)
	}
}

func TestUndefinedIsAnError(t *testing.T) {
	e := runErr(t, "function transform(r) { r.method = 'PUT'; }", sample(), roomy)
	if e.Reason != ReasonResult || e.Message != nothing {
		t.Errorf("err = %+v", e)
	}
}

func TestResultErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"return 42", "returned a number, not a request"},
		{"return 'x'", "returned a string, not a request"},
		{"return [r]", "returned an array"},
		{"r.method = 7; return r", "method must be a string, not a number"},
		{"r.method = 'GE T'; return r", `method "GE T" is not a valid HTTP method`},
		{"r.path = 'orders'; return r", `must start with "/"`},
		{"r.path = '/a?b=1'; return r", "put the query in request.query"},
		{"r.headers = 'x'; return r", "headers must be an object"},
		{"r.headers = {'x-count': 3}; return r", `header "x-count" must be a string or an array of strings, not a number`},
		{"r.headers = {'x-list': ['a', null]}; return r", `header "x-list" must be a string or an array of strings`},
		{"r.headers = {'bad name': 'v'}; return r", `header name "bad name" is not valid`},
		{"r.headers = {'x-a': 'v\\r\\nx-b: w'}; return r", `header "x-a" has a line break`},
		{"r.body = {}; r.body.self = r.body; return r", "the body cannot be serialized as JSON"},
		{"r.body = function () {}; return r", "the body cannot be serialized as JSON: it is a function"},
	} {
		e := runErr(t, "function transform(r) { "+c.src+" }", sample(), roomy)
		if e.Reason != ReasonResult || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: err = %s %q, want RESULT with %q", c.src, e.Reason, e.Message, c.want)
		}
	}
}

func TestThrow(t *testing.T) {
	src := "function transform(r) {\n  var x = r.body.id;\n  if (x) throw new TypeError('no order ' + x);\n  return r;\n}"
	e := runErr(t, src, sample(), roomy)
	if e.Reason != ReasonThrow || e.Line != 3 || e.Column == 0 {
		t.Fatalf("err = %+v, want THROW on line 3", e)
	}
	if want := fmt.Sprintf("TypeError: no order 7 at 3:%d", e.Column); e.Message != want {
		t.Errorf("message = %q, want %q", e.Message, want)
	}

	e = runErr(t, "function transform(r) {\n  return r.nope.deeper;\n}", sample(), roomy)
	if e.Reason != ReasonThrow || e.Line != 2 || !strings.Contains(e.Message, "TypeError") {
		t.Errorf("err = %+v", e)
	}

	e = runErr(t, "function transform(r) { throw {code: 42}; }", sample(), roomy)
	if e.Reason != ReasonThrow || !strings.HasPrefix(e.Message, `{"code":42} at 1:`) {
		t.Errorf("err = %+v", e)
	}

	// Top-level code runs too, and its errors are reported the same way.
	e = runErr(t, "function transform(r) { return r; }\nnull.x;", sample(), roomy)
	if e.Reason != ReasonThrow || e.Line != 2 {
		t.Errorf("err = %+v", e)
	}

	e = runErr(t, "var transform = 5;", sample(), roomy)
	if e.Reason != ReasonThrow || !strings.Contains(e.Message, "transform is not a function: it is a number") {
		t.Errorf("err = %+v", e)
	}
}

func TestThrowCannotHide(t *testing.T) {
	// A thrown object whose printing throws again, or loops, is still
	// reported.
	e := runErr(t, "function transform(r) { throw {toJSON() { throw 1; }, toString() { throw 2; }}; }", sample(), roomy)
	if e.Reason != ReasonThrow || !strings.Contains(e.Message, "cannot be printed") {
		t.Errorf("err = %+v", e)
	}
	start := time.Now()
	e = runErr(t, "function transform(r) { throw {toJSON() { for (;;) {} }}; }", sample(), Limits{CPU: 50 * time.Millisecond})
	if time.Since(start) > time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if e.Reason != ReasonThrow && e.Reason != ReasonTimeout {
		t.Errorf("err = %+v", e)
	}
}

func TestTimeout(t *testing.T) {
	for _, src := range []string{
		"function transform(r) { while (true) {} }",
		"while (true) {}\nfunction transform(r) { return r; }",
		"function transform(r) { try { for (;;) {} } catch (e) {} finally { return r; } }",
		"function transform(r) { return {get body() { for (;;) {} }}; }",
		"function transform(r) { var a = [3, 1, 2]; a.sort(function () { for (;;) {} }); }",
	} {
		before := runtime.NumGoroutine()
		start := time.Now()
		e := runErr(t, src, sample(), Limits{CPU: 50 * time.Millisecond})
		took := time.Since(start)
		if e.Reason != ReasonTimeout || !strings.Contains(e.Message, "time limit of 50ms") || e.Line == 0 {
			t.Errorf("%s: err = %+v", src, e)
		}
		// Interrupted JavaScript stops at once; the margin is for a busy machine.
		if took > time.Second {
			t.Errorf("%s: took %v for a limit of 50ms", src, took)
		}
		waitGoroutines(t, before)
	}
	if Abandoned() != 0 {
		t.Errorf("Abandoned = %d", Abandoned())
	}
}

// waitGoroutines checks that a run left no goroutine behind.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Errorf("goroutines = %d, was %d", runtime.NumGoroutine(), before)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestContext(t *testing.T) {
	p := compile(t, "function transform(r) { while (true) {} }")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, _, err := p.Run(ctx, sample(), Limits{CPU: 10 * time.Second})
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonTimeout || !strings.Contains(e.Message, "cancelled") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v after the context was cancelled", took)
	}

	// A context already done does not run anything.
	_, _, err = p.Run(ctx, sample(), roomy)
	if !errors.As(err, &e) || e.Reason != ReasonTimeout {
		t.Errorf("err = %v", err)
	}
}

func TestStackOverflow(t *testing.T) {
	e := runErr(t, "function f(n) { return f(n + 1) + 1; }\nfunction transform(r) { f(0); }", sample(), roomy)
	if e.Reason != ReasonMemory || !strings.Contains(e.Message, "endless recursion") {
		t.Errorf("err = %+v", e)
	}
}

// TestMemoryBombs runs code that allocates without end, or would allocate
// far more than the limit in one built-in call. Each must stop with MEMORY
// or TIMEOUT, soon, with the process's heap still small.
func TestMemoryBombs(t *testing.T) {
	bombs := []string{
		"let a = []; while (true) a.push(new Array(1e6));",
		"let a = []; while (true) a.push(new Array(1e5).fill(0));",
		"let a = []; while (true) a.push({n: a.length, s: 'x' + a.length});",
		"let s = 'x'; while (true) s = s + s;",
		"'x'.repeat(1e9);",
		"'ab'.repeat(2 ** 28);",
		"''.padStart(1e9);",
		"'x'.padEnd(2 ** 30, 'yz');",
		"new Array(1e9);",
		"new Array(1e9 - 1).fill(0);",
		"let a = []; a.length = 2 ** 32 - 1; a.fill(0);",
		"let a = []; a[2 ** 32 - 2] = 1; a.indexOf(2);",
		"let a = []; a.length = 1e9; [...a];",
		"let a = []; a.length = 1e9; a.join('x');",
		"let a = []; a.length = 1e9; a.map(x => x);",
		"Array.from({length: 1e9});",
		"Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1);",
		"Array.prototype.fill.call({length: 2 ** 53 - 1}, 0);",
		"Math.max.apply(null, {length: 1e9});",
		"Reflect.apply(Math.max, null, {length: 1e9});",
		"new ArrayBuffer(1e12);",
		"new Uint8Array(1e10);",
		"new Float64Array({length: 1e9});",
		"Uint8Array.from({length: 1e9});",
		"let x = [1]; for (let i = 0; i < 40; i++) x = [x, x]; JSON.stringify(x);",
		"let x = [1]; for (let i = 0; i < 40; i++) x = [x, x]; String(x);",
		"let x = [1]; for (let i = 0; i < 40; i++) x = [x, x]; x.flat(Infinity);",
		"let x = [1]; for (let i = 0; i < 40; i++) x = x.concat(x);",
		"let o = {}; for (let i = 0; i < 40; i++) o = {a: o, b: o}; JSON.stringify(o, null, 10);",
		"let b = 'y'.repeat(1e5); 'x'.repeat(1e5).replace(/x/g, b);",
		"let b = 'y'.repeat(1e5); 'x'.repeat(1e5).replaceAll('x', b);",
		"'x'.repeat(2e5).replace(/x/g, '$`');",
		"let b = 'y'.repeat(1e6); ''.concat(...new Array(1e4).fill(b));",
		"let b = 'y'.repeat(1e6); new Array(1e4).fill(b).join('');",
		"String.raw({raw: {length: 1e9}});",
		"Object.keys('x'.repeat(5e6));",
		"function f() { return [f(), f()]; } f();",
	}
	lim := Limits{CPU: 2 * time.Second, Memory: 32 << 20}
	for _, bomb := range bombs {
		src := "function transform(r) { " + bomb + " return r; }"
		start := time.Now()
		_, _, err := compile(t, src).Run(context.Background(), sample(), lim)
		took := time.Since(start)
		var e *Error
		if !errors.As(err, &e) || (e.Reason != ReasonMemory && e.Reason != ReasonTimeout) {
			t.Errorf("%s: err = %v, want MEMORY or TIMEOUT", bomb, err)
			continue
		}
		if took > 5*time.Second {
			t.Errorf("%s: took %v", bomb, took)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > 512<<20 {
			t.Errorf("%s: heap in use %d MiB after the run", bomb, ms.HeapInuse>>20)
		}
		t.Logf("%-80s %-7s %6v %s", bomb, e.Reason, took.Round(time.Millisecond), e.Message)
	}
	// A run stuck in a built-in may have been abandoned on a slow machine;
	// it must still end.
	deadline := time.Now().Add(10 * time.Second)
	for Abandoned() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Abandoned = %d", Abandoned())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTampering changes what the guards might rely on: the guards keep
// working, and the process survives.
func TestTampering(t *testing.T) {
	for _, src := range []string{
		`Object.defineProperty(Array.prototype, '0', {
			set(v) { Object.defineProperty(this, '0', {get() { return 1e12; }, set() {}, configurable: true}); },
			configurable: true});
		new Uint8Array(5); new ArrayBuffer(8); [1, 2].join(); 'x'.repeat(3); Array.from({length: 3}); 'ab'.concat('c');`,
		`Object.prototype.get = function () { return 1e12; }; new Uint8Array(5);`,
		"String.prototype.indexOf = () => -1; 'x'.repeat(1e5).replace(/x/g, '$`');",
		`Reflect.apply = null; Object.getPrototypeOf(function () {}).call = null; 'ab'.repeat(2) + [1].map(x => x).join();`,
		`Array.isArray = () => true; Array.prototype.fill.call({length: 2 ** 53 - 1}, 0);`,
		`Symbol.iterator; Array.prototype[Symbol.iterator] = function* () { for (;;) yield 1; }; [...[1]];`,
		`var n = 0; var o = {get length() { return n++ ? 1e12 : 1; }}; Array.prototype.fill.call(o, 0); new Uint8Array(o);`,
		`delete globalThis.Uint8Array; globalThis.ArrayBuffer = 1; new Int8Array(4);`,
	} {
		start := time.Now()
		_, _, err := compile(t, "function transform(r) { "+src+"\n return r; }").Run(context.Background(), sample(), Limits{CPU: 2 * time.Second})
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Errorf("%s: err = %v", src, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: took %v", src, took)
		}
		t.Logf("%.60s: %v", src, err)
	}
}

func TestMemoryUnderLimit(t *testing.T) {
	// Work that fits the limit is not stopped.
	src := `function transform(r) {
		var a = [];
		for (var i = 0; i < 10000; i++) a.push({i: i, s: 'item ' + i});
		r.body = {n: a.length, s: 'ab'.repeat(1000).length};
		return r;
	}`
	out, _, err := run(t, src, sample())
	if err != nil || string(out.Body) != `{"n":10000,"s":2000}` {
		t.Errorf("body = %s, err = %v", out.Body, err)
	}
}

func TestNothingFromOutside(t *testing.T) {
	for _, name := range []string{
		"require", "fetch", "setTimeout", "setInterval", "setImmediate", "queueMicrotask",
		"eval", "Function", "XMLHttpRequest", "process", "module", "exports", "Deno", "Bun",
	} {
		if got := eval(t, "typeof "+name); got != `"undefined"` {
			t.Errorf("typeof %s = %s", name, got)
		}
	}
	// The Function constructor is not reachable through functions either.
	for _, fn := range []string{"function () {}", "function* () {}", "async function () {}", "() => 1"} {
		expr := "typeof (" + fn + ").constructor('return 1')"
		if got := eval(t, expr); got == `"function"` {
			t.Errorf("%s = %s", expr, got)
		}
	}
	// eval called directly is just an undefined name.
	e := runErr(t, "function transform(r) { return eval('r'); }", sample(), roomy)
	if e.Reason != ReasonThrow || !strings.Contains(e.Message, "ReferenceError") {
		t.Errorf("eval: %+v", e)
	}
	// console exists and does nothing; Math.random works.
	if got := eval(t, "(console.log('x'), console.error('y'), typeof Math.random())"); got != `"number"` {
		t.Errorf("console and Math.random: %s", got)
	}
}

func TestEachRunIsFresh(t *testing.T) {
	p := compile(t, `
		var count = (globalThis.count || 0) + 1;
		globalThis.count = count;
		Array.prototype.polluted = true;
		function transform(r) { r.body = {count: count}; return r; }`)
	for i := 0; i < 3; i++ {
		out, _, err := p.Run(context.Background(), sample(), roomy)
		if err != nil || string(out.Body) != `{"count":1}` {
			t.Fatalf("run %d: body = %s, err = %v", i, out.Body, err)
		}
	}
}

// TestBuiltins checks that the wrapped built-ins still do what they did.
func TestBuiltins(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"[1, 2, 3].map(x => x * 2).join('-')", `"2-4-6"`},
		{"[1, [2, [3, [4]]]].flat(Infinity)", `[1,2,3,4]`},
		{"[1, [2, [3]]].flat()", `[1,2,[3]]`},
		{"[1, 2].flatMap(x => [x, [x * 10]])", `[1,[10],2,[20]]`},
		{"[].concat([1], [2, [3]], 4)", `[1,2,[3],4]`},
		{"[1, , 3].concat([4]).length", `4`},
		{"String([1, [2, 3], null, undefined, 'x'])", `"1,2,3,,,x"`},
		{"(function () { var a = [1]; a.push(a); return String(a); })()", `"1,"`},
		{"[1234.5].toLocaleString().length > 0", `true`},
		{"'ab'.repeat(3)", `"ababab"`},
		{"'5'.padStart(3, '0') + '|' + 'x'.padEnd(3)", `"005|x  "`},
		{"'a'.concat('b', 1, null)", `"ab1null"`},
		{"String.raw({raw: ['a', 'b', 'c']}, 1, 2)", `"a1b2c"`},
		{"'a-b-c'.replace('-', '[$&]')", `"a[-]b-c"`},
		{"'a-b-c'.replaceAll('-', '+')", `"a+b+c"`},
		{"'2024-05'.replace(/(\\d+)-(\\d+)/, '$2/$1 $$')", `"05/2024 $"`},
		{"'abc'.replace(/b/, x => x.toUpperCase())", `"aBc"`},
		{"'x'.repeat(100).replace(/x/g, '$`').length", `4950`},
		{"Array.from('abc')", `["a","b","c"]`},
		{"Array.from({length: 3}, (_, i) => i * i)", `[0,1,4]`},
		{"Array.from(new Set([1, 1, 2]))", `[1,2]`},
		{"[...'ab', ...[1, 2]]", `["a","b",1,2]`},
		{"Array.prototype.slice.call({length: 2, 0: 'a', 1: 'b'})", `["a","b"]`},
		{"(function () { var o = {length: 2, 0: 'b', 1: 'a'}; Array.prototype.sort.call(o); return [o[0], o[1], o.length]; })()", `["a","b",2]`},
		{"[3, 1, 2].sort()", `[1,2,3]`},
		{"Math.max.apply(null, [1, 5, 2])", `5`},
		{"Reflect.apply(Math.min, null, [4, 2])", `2`},
		{"Reflect.construct(Date, [0]).getTime()", `0`},
		{"[[] instanceof Array, Array.isArray(new Array(3)), new Array(3).length, Array(2, 3).length, [].constructor === Array]", `[true,true,3,2,true]`},
		{"(function () { class X extends Array {} var x = new X(); x.push(1); return [x instanceof X, x instanceof Array, x.length]; })()", `[true,true,1]`},
		{"[new Uint8Array(2) instanceof Uint8Array, Uint8Array.from([1, 2]).join('+'), new Uint8Array([1, 2, 3]).length]", `[true,"1+2",3]`},
		{"new Float64Array(new ArrayBuffer(16)).length", `2`},
		{"JSON.stringify({a: 1, b: 2, c: {b: 3, d: 4}}, ['c', 'b'])", `"{\"c\":{\"b\":3},\"b\":2}"`},
		{"JSON.stringify({a: [1]}, null, 1)", `"{\n \"a\": [\n  1\n ]\n}"`},
		{"JSON.stringify({a: 1, b: 'x'}, (k, v) => typeof v === 'number' ? v + 1 : v)", `"{\"a\":2,\"b\":\"x\"}"`},
		{"JSON.stringify({d: new Date(0)})", `"{\"d\":\"1970-01-01T00:00:00.000Z\"}"`},
		{"Object.keys('abc')", `["0","1","2"]`},
		{"Object.entries({a: 1})", `[["a",1]]`},
		{"[1, 2, 3].includes(2) && [1, 2, 3].indexOf(3) === 2", `true`},
		{"(function (a, b) { return a + b; }).apply(null, [1, 2])", `3`},
	} {
		if got := eval(t, c.expr); got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}

func TestConcurrentRuns(t *testing.T) {
	p := compile(t, `function transform(r) {
		r.headers['x-n'] = String(r.body.n);
		r.body.double = r.body.n * 2;
		return r;
	}`)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				n := g*100 + i
				in := Request{Method: "POST", Path: "/", Header: http.Header{}, Body: []byte(fmt.Sprintf(`{"n":%d}`, n))}
				out, _, err := p.Run(context.Background(), in, roomy)
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf(`{"n":%d,"double":%d}`, n, 2*n); string(out.Body) != want || out.Header.Get("X-N") != fmt.Sprint(n) {
					errs <- fmt.Errorf("run %d: body %s, header %q", n, out.Body, out.Header.Get("X-N"))
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkRun(b *testing.B) {
	benchRun(b, `function transform(request) {
		request.headers['x-order'] = String(request.body.id);
		request.body.total = request.body.items.reduce(function (n, i) { return n + i.qty; }, 0);
		return request;
	}`)
}

// passThrough moves the body without looking into it, as most wrapping and routing transforms do. It is
// one a plan covers.
const passThrough = `function transform(r) { r.headers["x-shaped"] = "1"; r.body = {data: r.body}; return r; }`

// BenchmarkRunPassThrough runs passThrough by its plan and in the engine.
func BenchmarkRunPassThrough(b *testing.B) {
	b.Run("plan", func(b *testing.B) { benchRun(b, passThrough) })
	b.Run("engine", func(b *testing.B) { benchRun(b, passThrough, engineOnly) })
}

// BenchmarkRunManyPrograms passes on a 1 KiB body through a hundred programs in turn, from as many
// goroutines as CPUs, as a dispatcher does for a hundred recipients that each have a transform: in the
// engine, every run finds its runtime's memory cold.
func BenchmarkRunManyPrograms(b *testing.B) {
	b.Run("plan", func(b *testing.B) { benchMany(b, passThrough) })
	b.Run("engine", func(b *testing.B) { benchMany(b, passThrough, engineOnly) })
	b.Run("plan-reading", func(b *testing.B) {
		benchMany(b, `function transform(r) { r.headers["x-event"] = r.body.type; r.body = {data: r.body}; return r; }`)
	})
	b.Run("engine-reading", func(b *testing.B) {
		benchMany(b, `function transform(r) { r.headers["x-event"] = r.body.type.toUpperCase(); r.body = {data: r.body}; return r; }`)
	})
}

func benchMany(b *testing.B, src string, opts ...func(*Program)) {
	ps := make([]*Program, 100)
	for i := range ps {
		ps[i] = compile(b, src)
		for _, o := range opts {
			o(ps[i])
		}
	}
	in := sample()
	in.Body = invoice.Body()
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := ps[next.Add(1)%uint64(len(ps))].Run(context.Background(), in, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// engineOnly makes a program run in the engine whatever its source.
func engineOnly(p *Program) { p.plan = nil }

func benchRun(b *testing.B, src string, opts ...func(*Program)) {
	p := compile(b, src)
	for _, o := range opts {
		o(p)
	}
	in := sample()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := p.Run(ctx, in, roomy); err != nil {
			b.Fatal(err)
		}
	}
}

// A program's idle runtimes keep a goroutine each; they end once the program is no longer used.
func TestIdleWorkersEndWithTheirProgram(t *testing.T) {
	var ended []chan struct{}
	func() {
		p := compile(t, "function transform(r) { return r; }")
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := p.runEngine(context.Background(), sample(), roomy); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		var kept []*worker
		for len(p.idle) > 0 {
			w := <-p.idle
			kept, ended = append(kept, w), append(ended, w.ended)
		}
		if len(kept) == 0 {
			t.Fatal("no worker was kept for the next run")
		}
		for _, w := range kept {
			p.idle <- w
		}
	}()
	deadline := time.After(10 * time.Second)
	for _, e := range ended {
		for waiting := true; waiting; {
			runtime.GC()
			select {
			case <-e:
				waiting = false
			case <-deadline:
				t.Fatal("an idle worker's goroutine outlived its program")
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// runOnSandbox runs src once in the engine, on a fresh sandbox that prepare sets up, and returns the
// sandbox with the result.
func runOnSandbox(t *testing.T, src string, in Request, prepare func(*sandbox)) (result, *sandbox) {
	t.Helper()
	w, err := newWorker(Limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	prepare(w.s)
	return w.s.run(compile(t, src).prg, in), w.s
}

// Long strings in a returned body are quoted by the host; the body must still be what JSON.stringify
// writes, escapes and lone surrogates included. A string that may hold a lone surrogate (U+FFFD once read
// in Go) is left to the engine.
func TestSerializedStringsMatchStringify(t *testing.T) {
	for _, c := range []struct {
		expr  string
		taken int // strings quoted by the host: x's long ones, and JSON.stringify(x)'s text
	}{
		{`"x".repeat(40)`, 2},
		{`"q\"b\\s/\n\t\r\b\f\u0001\u001f".repeat(8)`, 2},
		{`"caf\u00e9 \u2028 \u2029 \ufffd ".repeat(8)`, 0},
		{`"\ud83d\ude00 emoji ".repeat(8)`, 2},
		{`"\ud800 lone ".repeat(8)`, 1},
		{`"\udc00" + "x".repeat(40) + "\ud800"`, 1},
		{`["short", "y".repeat(64), {k: "z".repeat(33), n: 1}]`, 3},
		{`{toJSON: function () { return "w".repeat(50); }}`, 2},
		{`"adal-body-" + "0".repeat(40)`, 2},
	} {
		src := `function transform(r) { var x = ` + c.expr + `; r.body = {data: x, json: JSON.stringify(x)}; return r; }`
		res, s := runOnSandbox(t, src, sample(), func(*sandbox) {})
		if res.err != nil {
			t.Fatalf("%s: %v", c.expr, res.err)
		}
		var got struct {
			Data json.RawMessage
			JSON string
		}
		if err := json.Unmarshal(res.out.Body, &got); err != nil {
			t.Fatalf("%s: %v in %s", c.expr, err, res.out.Body)
		}
		if string(got.Data) != got.JSON {
			t.Errorf("%s: serialized as\n%s\nwant\n%s", c.expr, got.Data, got.JSON)
		}
		if len(s.stash) != c.taken {
			t.Errorf("%s: the host quoted %d strings, want %d", c.expr, len(s.stash), c.taken)
		}
	}
}
