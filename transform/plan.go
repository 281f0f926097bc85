package transform

import (
	"bytes"
	"github.com/adal-relay/adal/internal/jsontext"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/adal-relay/adal/webhook"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

// A plan runs a transform without the JavaScript engine. Most transformations are a few statements that
// set or delete headers, set the method, path or query, and replace or wrap the body with literals, the
// request's own fields, properties read from its body and strings joined from those, then return the
// request (or null). Such a source also compiles to a plan, which a
// run follows in Go to the result the engine would give: the same fields, the same header values in the
// same order, the same body bytes. Anything the plan does not cover is left to the engine: at compile time
// any other statement or expression, and at run time an input it cannot answer for as the engine would (a
// body that is JSON but not an object, a missing header read, a value the result's checks refuse).
type plan struct {
	steps  []step
	cancel bool // the function returns null
}

type stepKind int

const (
	setField     stepKind = iota // request.<field> = expr (method, path, query or body)
	setHeader                    // request.headers[key] = expr
	deleteHeader                 // delete request.headers[key]
	deleteBody                   // delete request.body
)

type step struct {
	kind stepKind
	name string // the field or the header's key
	expr *expr
}

type exprKind int

const (
	exprJSON     exprKind = iota // a number, true, false or null, as its JSON text
	exprString                   // a string literal
	exprField                    // request.<field>
	exprHeader                   // request.headers[key]
	exprObject                   // an object literal
	exprArray                    // an array literal
	exprRead                     // a property of a value: elems[0].<keys...>, an item where a key is an index
	exprConcat                   // elems[0] + elems[1]
	exprTemplate                 // a template literal: elems, strings between the expressions
)

type expr struct {
	kind  exprKind
	text  string   // the JSON text, the string, the field or the header's key
	keys  []string // the object's keys, in order; the path a read follows
	elems []*expr  // the object's values or the array's elements; what a read starts from
}

// fields are the request's fields a plan reads and sets.
var fields = map[string]bool{"method": true, "path": true, "query": true, "body": true}

// compilePlan is the plan of a parsed source, or nil when the source is not one a plan covers.
func compilePlan(tree *ast.Program) *plan {
	if len(tree.Body) != 1 || len(tree.DeclarationList) != 0 {
		return nil
	}
	decl, ok := tree.Body[0].(*ast.FunctionDeclaration)
	if !ok {
		return nil
	}
	fn := decl.Function
	if fn.Name == nil || fn.Name.Name != "transform" || fn.Async || fn.Generator || len(fn.DeclarationList) != 0 ||
		fn.ParameterList == nil || fn.ParameterList.Rest != nil || len(fn.ParameterList.List) != 1 || fn.Body == nil {
		return nil
	}
	param, ok := fn.ParameterList.List[0].Target.(*ast.Identifier)
	if !ok || fn.ParameterList.List[0].Initializer != nil {
		return nil
	}
	c := planCompiler{param: param.Name.String()}
	list := fn.Body.List
	if len(list) == 0 {
		return nil
	}
	p := &plan{}
	ret, ok := list[len(list)-1].(*ast.ReturnStatement)
	if !ok {
		return nil
	}
	switch arg := ret.Argument.(type) {
	case *ast.Identifier:
		if arg.Name.String() != c.param {
			return nil
		}
	case *ast.NullLiteral:
		p.cancel = true
	default:
		return nil
	}
	for _, st := range list[:len(list)-1] {
		s, ok := c.statement(st)
		if !ok {
			return nil
		}
		p.steps = append(p.steps, s)
	}
	return p
}

type planCompiler struct{ param string }

func (c planCompiler) statement(st ast.Statement) (step, bool) {
	es, ok := st.(*ast.ExpressionStatement)
	if !ok {
		return step{}, false
	}
	switch e := es.Expression.(type) {
	case *ast.AssignExpression:
		if e.Operator != token.ASSIGN {
			return step{}, false
		}
		value, ok := c.expr(e.Right)
		if !ok {
			return step{}, false
		}
		if name, ok := c.field(e.Left); ok {
			return step{kind: setField, name: name, expr: value}, true
		}
		if key, ok := c.header(e.Left); ok && webhook.ValidHeaderName(key) {
			return step{kind: setHeader, name: key, expr: value}, true
		}
	case *ast.UnaryExpression:
		if e.Operator != token.DELETE {
			return step{}, false
		}
		if name, ok := c.field(e.Operand); ok && name == "body" {
			return step{kind: deleteBody}, true
		}
		if key, ok := c.header(e.Operand); ok {
			return step{kind: deleteHeader, name: key}, true
		}
	}
	return step{}, false
}

// field matches request.method, .path, .query and .body.
func (c planCompiler) field(e ast.Expression) (string, bool) {
	d, ok := e.(*ast.DotExpression)
	if !ok || !c.isParam(d.Left) {
		return "", false
	}
	name := d.Identifier.Name.String()
	return name, fields[name]
}

// member splits x.key and x["key"] into x and a plain key (plainKey).
func member(e ast.Expression) (left ast.Expression, key string, ok bool) {
	switch m := e.(type) {
	case *ast.DotExpression:
		left, key = m.Left, m.Identifier.Name.String()
	case *ast.BracketExpression:
		lit, ok := m.Member.(*ast.StringLiteral)
		if !ok {
			return nil, "", false
		}
		left, key = m.Left, lit.Value.String()
	default:
		return nil, "", false
	}
	return left, key, plainKey(key)
}

// header matches request.headers.name and request.headers["name"].
func (c planCompiler) header(e ast.Expression) (string, bool) {
	left, key, ok := member(e)
	if !ok {
		return "", false
	}
	d, ok := left.(*ast.DotExpression)
	if !ok || !c.isParam(d.Left) || d.Identifier.Name.String() != "headers" {
		return "", false
	}
	return key, true
}

func (c planCompiler) isParam(e ast.Expression) bool {
	id, ok := e.(*ast.Identifier)
	return ok && id.Name.String() == c.param
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// plainKey is a property name that an object keeps in the order it was set and that sets no prototype:
// ASCII, not an array index, not __proto__.
func plainKey(k string) bool {
	return k != "" && k != "__proto__" && (k[0] < '0' || k[0] > '9') && ascii(k)
}

func (c planCompiler) expr(e ast.Expression) (*expr, bool) {
	switch e := e.(type) {
	case *ast.StringLiteral:
		s := e.Value.String()
		if !ascii(s) {
			return nil, false
		}
		return &expr{kind: exprString, text: s}, true
	case *ast.NumberLiteral:
		return number(e, false)
	case *ast.UnaryExpression:
		if n, ok := e.Operand.(*ast.NumberLiteral); ok && e.Operator == token.MINUS && !e.Postfix {
			return number(n, true)
		}
	case *ast.BooleanLiteral:
		return &expr{kind: exprJSON, text: strconv.FormatBool(e.Value)}, true
	case *ast.NullLiteral:
		return &expr{kind: exprJSON, text: "null"}, true
	case *ast.DotExpression, *ast.BracketExpression:
		if name, ok := c.field(e); ok {
			return &expr{kind: exprField, text: name}, true
		}
		if key, ok := c.header(e); ok {
			return &expr{kind: exprHeader, text: key}, true
		}
		return c.read(e)
	case *ast.BinaryExpression:
		if e.Operator != token.PLUS {
			return nil, false
		}
		l, ok := c.expr(e.Left)
		if !ok {
			return nil, false
		}
		r, ok := c.expr(e.Right)
		if !ok {
			return nil, false
		}
		return &expr{kind: exprConcat, elems: []*expr{l, r}}, true
	case *ast.TemplateLiteral:
		if e.Tag != nil || len(e.Elements) != len(e.Expressions)+1 {
			return nil, false
		}
		out := &expr{kind: exprTemplate}
		for i, el := range e.Elements {
			text := el.Parsed.String()
			if !el.Valid || !ascii(text) {
				return nil, false
			}
			out.elems = append(out.elems, &expr{kind: exprString, text: text})
			if i < len(e.Expressions) {
				x, ok := c.expr(e.Expressions[i])
				if !ok {
					return nil, false
				}
				out.elems = append(out.elems, x)
			}
		}
		return out, true
	case *ast.ObjectLiteral:
		out := &expr{kind: exprObject}
		seen := map[string]bool{}
		for _, p := range e.Value {
			kv, ok := p.(*ast.PropertyKeyed)
			if !ok || kv.Kind != ast.PropertyKindValue || kv.Computed {
				return nil, false
			}
			key, ok := kv.Key.(*ast.StringLiteral)
			if !ok {
				return nil, false
			}
			k := key.Value.String()
			if !plainKey(k) || seen[k] {
				return nil, false
			}
			seen[k] = true
			v, ok := c.expr(kv.Value)
			if !ok {
				return nil, false
			}
			out.keys, out.elems = append(out.keys, k), append(out.elems, v)
		}
		return out, true
	case *ast.ArrayLiteral:
		out := &expr{kind: exprArray}
		for _, el := range e.Value {
			if el == nil {
				return nil, false // a hole
			}
			v, ok := c.expr(el)
			if !ok {
				return nil, false
			}
			out.elems = append(out.elems, v)
		}
		return out, true
	}
	return nil, false
}

// read matches a property read of request.body, or of a property or item of it: request.body.type,
// request.body["data"].items[0].id. Keys are plain (plainKey), so that one written in decimal is an index.
func (c planCompiler) read(e ast.Expression) (*expr, bool) {
	left, key, ok := member(e)
	if !ok {
		if left, key, ok = index(e); !ok {
			return nil, false
		}
	}
	if name, ok := c.field(left); ok && name == "body" {
		return &expr{kind: exprRead, keys: []string{key}, elems: []*expr{{kind: exprField, text: name}}}, true
	}
	inner, ok := c.read(left)
	if !ok {
		return nil, false
	}
	return &expr{kind: exprRead, keys: append(inner.keys[:len(inner.keys):len(inner.keys)], key), elems: inner.elems}, true
}

// index splits x[n], n an integer literal from 0, into x and n in decimal.
func index(e ast.Expression) (ast.Expression, string, bool) {
	b, ok := e.(*ast.BracketExpression)
	if !ok {
		return nil, "", false
	}
	n, ok := b.Member.(*ast.NumberLiteral)
	if !ok {
		return nil, "", false
	}
	i, ok := n.Value.(int64)
	if !ok || i < 0 || i > math.MaxInt32 {
		return nil, "", false
	}
	return b.Left, strconv.FormatInt(i, 10), true
}

// number is an integer literal as JSON writes it; other numbers are left to the engine's formatting.
func number(n *ast.NumberLiteral, negative bool) (*expr, bool) {
	var f float64
	switch v := n.Value.(type) {
	case int64:
		f = float64(v)
	case float64:
		f = v
	default:
		return nil, false
	}
	if f != math.Trunc(f) || math.Abs(f) >= 1e21 {
		return nil, false
	}
	if negative {
		f = -f
	}
	if f == 0 {
		return &expr{kind: exprJSON, text: "0"}, true
	}
	return &expr{kind: exprJSON, text: strconv.FormatFloat(f, 'f', -1, 64)}, true
}

type valueKind int

const (
	valString valueKind = iota // a string: text
	valJSON                    // JSON text: a number, true, false or null
	valObject
	valArray
	valBody // the request's JSON object body: body
)

type value struct {
	kind  valueKind
	text  string
	keys  []string
	elems []value
	body  *jsonBody
	// size bounds the length of the value's JSON from above; a value that would go over the memory limit
	// is left to the engine, before it is built.
	size int64
}

// jsonBody is the request's body when it is a JSON object. As in the engine, it keeps its bytes until a
// run reads a property of it; from then on, wherever it is in the result, it is serialized again from its
// parsed value.
type jsonBody struct {
	raw     []byte
	parsed  value
	touched bool
}

type planState struct {
	method, path, query string
	headers             []header
	body                value
	bodyDeleted         bool
	limit               int64 // the memory limit
}

// add appends an item to an array, or a property to an object (key), keeping the size bound.
func (v *value) add(key string, item value) {
	if v.kind == valObject {
		v.keys = append(v.keys, key)
	}
	v.elems = append(v.elems, item)
	v.size += v.memberSize(key, item)
}

// memberSize bounds what an item, or a property and its key, adds to the length of v's JSON.
func (v *value) memberSize(key string, item value) int64 {
	if v.kind == valObject {
		return 4 + 6*int64(len(key)) + item.size
	}
	return 1 + item.size
}

// written is a number, a boolean or null as JSON and String write it: JSON.parse keeps -0, both write 0.
func (v value) written() string {
	if v.text == "-0" {
		return "0"
	}
	return v.text
}

func stringValue(s string) value {
	return value{kind: valString, text: s, size: 2 + 6*int64(len(s))}
}

func jsonValue(text string) value {
	return value{kind: valJSON, text: text, size: int64(len(text))}
}

// run follows the plan; ok false leaves the run to the engine.
func (p *plan) run(in Request, lim Limits) (out Request, cancel, ok bool) {
	st := planState{method: validUTF8(in.Method), path: validUTF8(in.Path), query: validUTF8(in.Query),
		headers: joinHeaders(in.Header), limit: lim.Memory}
	if jsontext.Valid(in.Body) {
		t := bytes.TrimSpace(in.Body)
		if t[0] != '{' {
			return Request{}, false, false // the engine parses it up front and serializes it anew
		}
		// Serialized again once read, the body is at most six times as long: \u escapes.
		st.body = value{kind: valBody, body: &jsonBody{raw: t}, size: 6 * int64(len(t))}
	} else {
		st.body = stringValue(validUTF8(string(in.Body)))
	}
	for _, s := range p.steps {
		if !st.apply(s) {
			return Request{}, false, false
		}
	}
	if p.cancel {
		return Request{}, true, true
	}
	return st.result(in, lim)
}

func (st *planState) apply(s step) bool {
	switch s.kind {
	case deleteBody:
		st.bodyDeleted = true
		return true
	case deleteHeader:
		for i, h := range st.headers {
			if h.key == s.name {
				st.headers = append(st.headers[:i:i], st.headers[i+1:]...)
				break
			}
		}
		return true
	}
	v, ok := st.eval(s.expr)
	if !ok {
		return false
	}
	if s.kind == setField && s.name == "body" {
		st.body, st.bodyDeleted = v, false
		return true
	}
	if v.kind != valString {
		return false // the result's checks would refuse it
	}
	switch {
	case s.kind == setHeader:
		for i := range st.headers {
			if st.headers[i].key == s.name {
				st.headers[i].value = v.text
				return true
			}
		}
		st.headers = append(st.headers, header{s.name, v.text})
	case s.name == "method":
		st.method = v.text
	case s.name == "path":
		st.path = v.text
	case s.name == "query":
		st.query = v.text
	}
	return true
}

func (st *planState) eval(e *expr) (value, bool) {
	switch e.kind {
	case exprJSON:
		return jsonValue(e.text), true
	case exprString:
		return stringValue(e.text), true
	case exprField:
		switch e.text {
		case "method":
			return stringValue(st.method), true
		case "path":
			return stringValue(st.path), true
		case "query":
			return stringValue(st.query), true
		}
		return st.body, !st.bodyDeleted
	case exprHeader:
		for _, h := range st.headers {
			if h.key == e.text {
				return stringValue(h.value), true
			}
		}
		return value{}, false // undefined, or a property of Object.prototype
	case exprConcat, exprTemplate:
		return st.concat(e)
	}
	if e.kind == exprRead {
		v, ok := st.eval(e.elems[0])
		for _, k := range e.keys {
			if v, ok = property(v, k, ok); !ok {
				return value{}, false
			}
		}
		return v, ok
	}
	v := value{kind: valObject, elems: make([]value, 0, len(e.elems)), size: 2}
	if e.kind == exprArray {
		v.kind = valArray
	}
	for i, el := range e.elems {
		item, ok := st.eval(el)
		if !ok {
			return value{}, false
		}
		key := ""
		if v.kind == valObject {
			key = e.keys[i]
		}
		if v.add(key, item); v.size > st.limit {
			return value{}, false
		}
	}
	return v, true
}

// concat is a + b, where either is a string, or a template literal: the parts written as strings, as
// JavaScript does for strings, numbers, booleans and null. An object is left to the engine, and so is a
// string longer than an eighth of the memory limit, which the engine might run out of building.
func (st *planState) concat(e *expr) (value, bool) {
	parts := make([]value, len(e.elems))
	for i, el := range e.elems {
		var ok bool
		if parts[i], ok = st.eval(el); !ok || parts[i].kind != valString && parts[i].kind != valJSON {
			return value{}, false
		}
	}
	if e.kind == exprConcat && parts[0].kind != valString && parts[1].kind != valString {
		return value{}, false // an addition
	}
	var b strings.Builder
	for _, p := range parts {
		text := p.text
		if p.kind == valJSON {
			text = p.written()
		}
		if int64(b.Len()+len(text)) > st.limit/8 {
			return value{}, false
		}
		b.WriteString(text)
	}
	return stringValue(b.String()), true
}

// property is v[k] where it is an own property of an object, parsing the request's body at its first
// read. Anything else (undefined, a property of a string or an array, an inherited one) goes to the engine.
func property(v value, k string, ok bool) (value, bool) {
	if !ok {
		return value{}, false
	}
	if v.kind == valBody {
		b := v.body
		if !b.touched {
			if b.parsed, ok = parseValue(b.raw); !ok {
				return value{}, false
			}
			b.touched = true
		}
		v = b.parsed
	}
	if v.kind == valArray {
		if k == "length" {
			return jsonValue(strconv.Itoa(len(v.elems))), true
		}
		if i, err := strconv.Atoi(k); err == nil && i < len(v.elems) {
			return v.elems[i], true
		}
		return value{}, false
	}
	if v.kind != valObject {
		return value{}, false
	}
	for i, key := range v.keys {
		if key == k {
			return v.elems[i], true
		}
	}
	return value{}, false
}

func (st *planState) result(in Request, lim Limits) (Request, bool, bool) {
	out := Request{Method: st.method, Path: st.path, Body: in.Body}
	var e *Error
	if checkMethod(out.Method) != nil || checkPath(out.Path) != nil {
		return Request{}, false, false
	}
	if out.Query, e = checkQuery(st.query); e != nil {
		return Request{}, false, false
	}
	out.Header = make(http.Header, len(st.headers))
	for _, h := range st.headers {
		if !webhook.ValidHeaderName(h.key) || !webhook.ValidHeaderValue(h.value) {
			return Request{}, false, false
		}
		out.Header.Add(http.CanonicalHeaderKey(h.key), h.value)
	}
	if st.bodyDeleted {
		return out, false, true
	}
	if st.body.kind == valString {
		out.Body = []byte(st.body.text)
		return out, false, true
	}
	if st.body.size > lim.Memory {
		return Request{}, false, false // the engine may fail the run with MEMORY
	}
	out.Body = appendJSON(nil, st.body)
	defaultContentType(out.Header)
	return out, false, true
}

// appendJSON writes v as JSON.stringify does.
func appendJSON(b []byte, v value) []byte {
	switch v.kind {
	case valString:
		return jsontext.AppendQuoted(b, v.text)
	case valJSON:
		return append(b, v.written()...)
	case valBody:
		if v.body.touched {
			return appendJSON(b, v.body.parsed)
		}
		return append(b, v.body.raw...)
	}
	open, close := byte('['), byte(']')
	if v.kind == valObject {
		open, close = '{', '}'
	}
	b = append(b, open)
	for i, el := range v.elems {
		if i > 0 {
			b = append(b, ',')
		}
		if v.kind == valObject {
			b = jsontext.AppendQuoted(b, v.keys[i])
			b = append(b, ':')
		}
		b = appendJSON(b, el)
	}
	return append(b, close)
}
