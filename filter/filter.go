// Package filter is the rule language of routing filters: a small JSON document that a request must match for
// a recipient to get it. A rule names the parts of a request — method, path, query, headers, body — by dot
// paths ("body.data.object.amount", "headers.x-github-event", "query.page") and tests them with $eq $neq $gt
// $gte $lt $lte $in $nin $exists $regex, combined with $and $or $not, as Convoy's and Hookdeck's filters do:
//
//	{"body.type": {"$in": ["invoice.paid", "invoice.failed"]}, "body.data.amount": {"$gte": 1000}}
//	{"$or": [{"headers.x-github-event": "push"}, {"body": {"ref": {"$regex": "^refs/tags/"}}}]}
//
// A rule is compiled once (Compile: validated, its patterns compiled, its size bounded) and evaluated per
// request (Filter.Match). Evaluation never fails: a value of the wrong type simply does not match.
package filter

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
)

// The bounds of a rule and of its evaluation. A rule's cost is linear in the request it looks at: paths visit
// each value of the body at most once, RE2 patterns run in time linear in their input, and the input they see
// is capped per value and per evaluation.
const (
	// MaxRuleBytes bounds a rule's JSON text.
	MaxRuleBytes = 16 << 10
	// MaxDepth bounds the nesting of objects and arrays in a rule.
	MaxDepth = 8
	// MaxConditions bounds the keys (fields and operators) of a rule, all levels together.
	MaxConditions = 64
	// MaxPathSegments bounds the segments of one path.
	MaxPathSegments = 16
	// MaxListValues bounds the values of one $in or $nin.
	MaxListValues = 256
	// MaxPattern bounds the text of one $regex, and maxProgram its compiled size (a short pattern with
	// counted repetitions can compile to a large program).
	MaxPattern = 256
	maxProgram = 1000
	// MaxRegexInput is how much of one value a $regex looks at: its first 4 KiB.
	MaxRegexInput = 4 << 10
	// MaxRegexBudget is how much text the patterns of one evaluation look at, all values together; past it
	// a $regex does not match.
	MaxRegexBudget = 64 << 10
	// MaxBodyParsed is the largest body parsed as JSON; a larger one has no fields (body.… finds nothing).
	MaxBodyParsed = 1 << 20
)

// Error is a rule refused by Compile: Path points at the bad part, from the rule's root "$"
// ("$.body.amount.$gte"), and Msg says what is wrong with it.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Filter is a compiled rule, safe for concurrent use.
type Filter struct {
	root node
	text string
	body bool // whether some condition looks at the body
}

// String is the rule's JSON text as compiled.
func (f *Filter) String() string { return f.text }

// NeedsBody reports whether the rule looks at the body: a rule that does not never parses it.
func (f *Filter) NeedsBody() bool { return f.body }

// Match reports whether the request in matches the rule.
func (f *Filter) Match(in *Input) bool {
	st := state{in: in, budget: MaxRegexBudget}
	return f.root.eval(&st)
}

// Compile validates a rule and compiles it. A refused rule's error is an *Error.
func Compile(rule []byte) (*Filter, error) {
	if len(rule) > MaxRuleBytes {
		return nil, &Error{Path: "$", Msg: fmt.Sprintf("a rule is at most %d bytes", MaxRuleBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(rule))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Path: "$", Msg: "not valid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Path: "$", Msg: "not valid JSON: data after the rule"}
	}
	c := compiler{}
	root, err := c.objectRule("$", nil, v, 1, "a rule is a JSON object")
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	if err := json.Compact(&text, rule); err != nil {
		return nil, &Error{Path: "$", Msg: "not valid JSON: " + err.Error()}
	}
	return &Filter{root: root, text: text.String(), body: c.body}, nil
}

// The parts of a request a path starts from.
const (
	rootMethod  = "method"
	rootPath    = "path"
	rootQuery   = "query"
	rootHeaders = "headers"
	rootBody    = "body"
)

// path is where a condition looks: a root and the segments below it.
type path struct {
	root     string
	segments []string
}

type compiler struct {
	conditions int
	body       bool
}

// objectRule compiles v as object does when it is a JSON object; anything else is the error msg at where.
func (c *compiler) objectRule(where string, prefix *path, v any, depth int, msg string) (node, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Path: where, Msg: msg}
	}
	return c.object(where, prefix, obj, depth)
}

// object compiles a rule object found at where (for messages) under the path prefix (nil at the top): its
// keys are fields, relative to prefix, and operators, all of which must hold.
func (c *compiler) object(where string, prefix *path, obj map[string]any, depth int) (node, error) {
	if depth > MaxDepth {
		return nil, &Error{Path: where, Msg: fmt.Sprintf("a rule nests at most %d levels", MaxDepth)}
	}
	if len(obj) == 0 {
		return nil, &Error{Path: where, Msg: `an empty object tests nothing: use {"$eq": {}} to match an empty object, or {"$exists": true}`}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same rule compiles to the same evaluation order, and reports the same first error
	out := make(all, 0, len(keys))
	for _, k := range keys {
		at := where + "." + k
		c.conditions++
		if c.conditions > MaxConditions {
			return nil, &Error{Path: at, Msg: fmt.Sprintf("a rule has at most %d conditions", MaxConditions)}
		}
		n, err := c.key(at, prefix, k, obj[k], depth)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

// key compiles one key of a rule object and its value.
func (c *compiler) key(at string, prefix *path, k string, v any, depth int) (node, error) {
	switch k {
	case "$and", "$or":
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, &Error{Path: at, Msg: "expected a non-empty array of rules"}
		}
		if depth+1 > MaxDepth {
			return nil, &Error{Path: at, Msg: fmt.Sprintf("a rule nests at most %d levels", MaxDepth)}
		}
		nodes := make([]node, len(list))
		for i, item := range list {
			n, err := c.objectRule(fmt.Sprintf("%s[%d]", at, i), prefix, item, depth+2, "expected a rule (a JSON object)")
			if err != nil {
				return nil, err
			}
			nodes[i] = n
		}
		if k == "$and" {
			return all(nodes), nil
		}
		return anyOf(nodes), nil
	case "$not":
		n, err := c.objectRule(at, prefix, v, depth+1, "expected a rule or a set of operators (a JSON object)")
		if err != nil {
			return nil, err
		}
		return not{n}, nil
	}
	if strings.HasPrefix(k, "$") {
		return c.operator(at, prefix, k, v)
	}
	p, err := extend(at, prefix, k)
	if err != nil {
		return nil, err
	}
	if p.root == rootBody {
		c.body = true
	}
	if obj, ok := v.(map[string]any); ok {
		return c.object(at, &p, obj, depth+1)
	}
	if err := checkLiteral(at, v, depth); err != nil {
		return nil, err
	}
	return test{path: p, op: eqOp{want: v}}, nil
}

// extend is prefix followed by the dot path key; at the top, key starts with a root.
func extend(at string, prefix *path, key string) (path, error) {
	segments := strings.Split(key, ".")
	for _, s := range segments {
		if s == "" {
			return path{}, &Error{Path: at, Msg: fmt.Sprintf("%q is not a dot path: a segment is empty", key)}
		}
	}
	var p path
	if prefix == nil {
		p.root = segments[0]
		segments = segments[1:]
		switch p.root {
		case rootMethod, rootPath, rootQuery, rootHeaders, rootBody:
		default:
			return path{}, &Error{Path: at, Msg: fmt.Sprintf("unknown field %q: a path starts with method, path, query, headers or body", p.root)}
		}
	} else {
		p.root = prefix.root
		p.segments = slices.Clone(prefix.segments)
	}
	p.segments = append(p.segments, segments...)
	if len(p.segments) > MaxPathSegments {
		return path{}, &Error{Path: at, Msg: fmt.Sprintf("a path has at most %d segments", MaxPathSegments)}
	}
	switch p.root {
	case rootMethod, rootPath:
		if len(p.segments) > 0 {
			return path{}, &Error{Path: at, Msg: p.root + " is text and has no fields"}
		}
	case rootQuery:
		if len(p.segments) > 1 {
			return path{}, &Error{Path: at, Msg: "a query parameter has no fields: query.NAME"}
		}
	case rootHeaders:
		if len(p.segments) > 1 {
			return path{}, &Error{Path: at, Msg: "a header has no fields: headers.NAME"}
		}
		if len(p.segments) == 1 {
			p.segments[0] = strings.ToLower(p.segments[0])
		}
	}
	return p, nil
}

// checkLiteral bounds a literal compared for equality: its nesting counts towards the rule's.
func checkLiteral(at string, v any, depth int) error {
	if d := depthOf(v); depth+d > MaxDepth+1 {
		return &Error{Path: at, Msg: fmt.Sprintf("a rule nests at most %d levels", MaxDepth)}
	}
	return nil
}

func depthOf(v any) int {
	switch x := v.(type) {
	case []any:
		d := 0
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	case map[string]any:
		d := 0
		for _, e := range x {
			d = max(d, depthOf(e))
		}
		return d + 1
	}
	return 0
}

// operator compiles a comparison operator that tests the value at prefix.
func (c *compiler) operator(at string, prefix *path, k string, v any) (node, error) {
	if prefix == nil {
		return nil, &Error{Path: at, Msg: fmt.Sprintf(`%s needs a field: {"body.type": {"%s": …}}`, k, k)}
	}
	var o op
	switch k {
	case "$eq", "$neq":
		if d := depthOf(v); d > MaxDepth {
			return nil, &Error{Path: at, Msg: fmt.Sprintf("a rule nests at most %d levels", MaxDepth)}
		}
		o = eqOp{want: v}
		if k == "$neq" {
			return test{path: *prefix, op: o, negate: true}, nil
		}
	case "$gt", "$gte", "$lt", "$lte":
		switch v.(type) {
		case json.Number, string:
		default:
			return nil, &Error{Path: at, Msg: "expected a number or a string"}
		}
		o = orderOp{bound: v, op: k}
	case "$in", "$nin":
		list, ok := v.([]any)
		if !ok {
			return nil, &Error{Path: at, Msg: "expected an array of values"}
		}
		if len(list) > MaxListValues {
			return nil, &Error{Path: at, Msg: fmt.Sprintf("expected at most %d values", MaxListValues)}
		}
		for i, e := range list {
			if depthOf(e) > 0 {
				return nil, &Error{Path: fmt.Sprintf("%s[%d]", at, i), Msg: "expected a string, number, boolean or null"}
			}
		}
		o = inOp{values: list}
		if k == "$nin" {
			return test{path: *prefix, op: o, negate: true}, nil
		}
	case "$exists":
		b, ok := v.(bool)
		if !ok {
			return nil, &Error{Path: at, Msg: "expected true or false"}
		}
		return exists{path: *prefix, want: b}, nil
	case "$regex":
		s, ok := v.(string)
		if !ok {
			return nil, &Error{Path: at, Msg: "expected a pattern (a string)"}
		}
		re, err := compilePattern(s)
		if err != nil {
			return nil, &Error{Path: at, Msg: err.Error()}
		}
		o = regexOp{re: re}
	default:
		return nil, &Error{Path: at, Msg: fmt.Sprintf("unknown operator %s: use $eq $neq $gt $gte $lt $lte $in $nin $exists $regex $and $or $not", k)}
	}
	return test{path: *prefix, op: o}, nil
}

// compilePattern compiles an RE2 pattern within the size bounds.
func compilePattern(s string) (*regexp.Regexp, error) {
	if len(s) > MaxPattern {
		return nil, fmt.Errorf("a pattern is at most %d bytes", MaxPattern)
	}
	parsed, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %w", err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %w", err)
	}
	if len(prog.Inst) > maxProgram {
		return nil, errors.New("pattern too large: fewer or smaller repetitions")
	}
	return regexp.Compile(s)
}

// state is one evaluation: the request and what is left of the patterns' budget.
type state struct {
	in     *Input
	budget int
}

type node interface {
	eval(st *state) bool
}

// all holds when every node holds ($and, and the keys of one object).
type all []node

func (a all) eval(st *state) bool {
	for _, n := range a {
		if !n.eval(st) {
			return false
		}
	}
	return true
}

// anyOf holds when one node holds ($or).
type anyOf []node

func (a anyOf) eval(st *state) bool {
	for _, n := range a {
		if n.eval(st) {
			return true
		}
	}
	return false
}

// not holds when its node does not ($not).
type not struct{ n node }

func (n not) eval(st *state) bool { return !n.n.eval(st) }

// exists tests whether a path finds a value ($exists).
type exists struct {
	path path
	want bool
}

func (e exists) eval(st *state) bool { return (len(st.in.resolve(e.path)) > 0) == e.want }

// test holds when one of the values at its path (or, for an array, one of its elements) passes op; negated, when
// none does ($neq, $nin: a missing field is not equal to anything).
type test struct {
	path   path
	op     op
	negate bool
}

func (t test) eval(st *state) bool {
	found := false
	for _, v := range st.in.resolve(t.path) {
		if t.op.match(st, v) {
			found = true
			break
		}
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				if t.op.match(st, e) {
					found = true
					break
				}
			}
			if found {
				break
			}
		}
	}
	return found != t.negate
}

type op interface {
	match(st *state, v any) bool
}

type eqOp struct{ want any }

func (o eqOp) match(_ *state, v any) bool { return equal(v, o.want) }

type inOp struct{ values []any }

func (o inOp) match(_ *state, v any) bool {
	for _, w := range o.values {
		if equal(v, w) {
			return true
		}
	}
	return false
}

type orderOp struct {
	bound any
	op    string
}

func (o orderOp) match(_ *state, v any) bool {
	c, ok := order(v, o.bound)
	if !ok {
		return false
	}
	switch o.op {
	case "$gt":
		return c > 0
	case "$gte":
		return c >= 0
	case "$lt":
		return c < 0
	default:
		return c <= 0
	}
}

type regexOp struct{ re *regexp.Regexp }

func (o regexOp) match(st *state, v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	s = s[:min(len(s), MaxRegexInput)]
	if st.budget < len(s) {
		return false
	}
	st.budget -= len(s)
	return o.re.MatchString(s)
}

// equal is JSON equality: numbers by value (a number also equals a string holding it, as header and query
// values are text), strings, booleans and null exactly, arrays and objects element by element.
func equal(a, b any) bool {
	switch x := b.(type) {
	case json.Number:
		c, ok := compareNumber(a, x)
		return ok && c == 0
	case string:
		s, ok := a.(string)
		return ok && s == x
	case bool:
		y, ok := a.(bool)
		return ok && y == x
	case nil:
		return a == nil
	case []any:
		y, ok := a.([]any)
		if !ok || len(y) != len(x) {
			return false
		}
		for i := range x {
			if !equal(y[i], x[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := a.(map[string]any)
		if !ok || len(y) != len(x) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(yv, xv) {
				return false
			}
		}
		return true
	}
	return false
}

// order compares v with bound: numbers by value (a string holding a number counts as one), strings
// lexicographically (ISO times sort as they should); anything else does not compare.
func order(v, bound any) (int, bool) {
	switch b := bound.(type) {
	case json.Number:
		return compareNumber(v, b)
	case string:
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, b), true
	}
	return 0, false
}

// compareNumber compares v, a JSON number or a string holding one, with n: exactly when both are integers
// (identifiers beyond 2^53 stay distinct), as floats otherwise.
func compareNumber(v any, n json.Number) (int, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = strings.TrimSpace(x)
	default:
		return 0, false
	}
	if a, err := strconv.ParseInt(s, 10, 64); err == nil {
		if b, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return cmp.Compare(a, b), true
		}
	}
	a, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	b, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, false
	}
	switch {
	case a < b:
		return -1, true
	case a > b:
		return 1, true
	}
	return 0, true
}
