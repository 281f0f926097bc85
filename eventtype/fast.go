package eventtype

import (
	"bytes"
	"encoding/json"
	"math/big"
	"regexp"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// node is a schema compiled for checking a body's raw text without decoding it, for a subset of the
// keywords. It can only vouch for a body: when a check fails, the body may still be valid, and the library
// decides. The keywords' values are read from the library's compiled schema, so that both mean the same.
type node struct {
	reject bool    // the false schema
	plain  bool    // no constraint at all
	types  typeSet // 0 for any type
	all    []*node // allOf, and a $ref beside other keywords: the value must satisfy each too
	anyOf  []*node // the value must satisfy one of them
	enums  [][]lit // enum and const: the value must be in each list
	bounds *bounds // minimum, maximum, exclusiveMinimum, exclusiveMaximum
	re     *regexp.Regexp

	// The counts are -1 when absent.
	minLen   int
	maxLen   int
	minProps int
	maxProps int
	minItems int
	maxItems int

	props    map[string]prop // properties, and the required names
	required uint64          // the bits of the required names
	extra    *node           // additionalProperties; nil when it allows anything
	items    *node
}

// prop is what an object's key means to its schema.
type prop struct {
	sub *node  // its schema in properties, or nil: additionalProperties applies
	bit uint64 // its bit in required, or 0
}

// lit is a constant other than an object or an array: kind is the first byte of its JSON text ('0' for
// any number), s a string's value, num a number's.
type lit struct {
	kind byte
	s    string
	num  *big.Rat
}

type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]typeSet{"null": typeNull, "boolean": typeBoolean, "number": typeNumber,
	"integer": typeInteger, "string": typeString, "array": typeArray, "object": typeObject}

// has reports whether t allows values of type u; the empty set allows all.
func (t typeSet) has(u typeSet) bool { return t == 0 || t&u != 0 }

// annotations are the keywords that assert nothing: format among them, as the compiler is not asked to
// assert it (compileFast checks that the library agrees).
var annotations = map[string]bool{"title": true, "description": true, "$comment": true, "examples": true,
	"default": true, "deprecated": true, "readOnly": true, "writeOnly": true, "format": true}

// fastKeywords are the keywords compileFast knows, besides annotations.
var fastKeywords = map[string]bool{"type": true, "enum": true, "const": true, "properties": true,
	"required": true, "additionalProperties": true, "items": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true, "minLength": true, "maxLength": true, "pattern": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "allOf": true,
	"anyOf": true, "$ref": true}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

var rejectNode = &node{reject: true}

// compileFast compiles the schema document doc, which the library compiled as s, or returns nil when it
// uses anything outside the subset.
func compileFast(doc any, s *jsonschema.Schema) *node {
	c := fastCompiler{busy: map[string]bool{}}
	if m, ok := doc.(map[string]any); ok {
		if v, ok := m["$schema"]; ok && v != draft2020 {
			return nil
		}
		c.defs, _ = m["$defs"].(map[string]any)
	}
	n, ok := c.compile(doc, s, true)
	if !ok {
		return nil
	}
	return n
}

type fastCompiler struct {
	defs map[string]any
	busy map[string]bool // the $defs being compiled, to refuse cycles
}

// compile walks a subschema's document and its compiled form together: the document tells which keywords
// are present, the compiled form what they mean.
func (c *fastCompiler) compile(doc any, s *jsonschema.Schema, root bool) (*node, bool) {
	if s.Bool != nil {
		// A boolean schema, or {}, which the library reads as true.
		switch d := doc.(type) {
		case bool:
			if d != *s.Bool {
				return nil, false
			}
		case map[string]any:
			if len(d) > 0 || !*s.Bool {
				return nil, false
			}
		default:
			return nil, false
		}
		if !*s.Bool {
			return rejectNode, true
		}
		return &node{plain: true}, true
	}
	obj, ok := doc.(map[string]any)
	if !ok || s.DraftVersion != 2020 || s.Format != nil || len(s.Extensions) > 0 {
		return nil, false
	}
	for k := range obj {
		if !fastKeywords[k] && !annotations[k] && !(root && (k == "$schema" || k == "$defs")) {
			return nil, false
		}
	}
	n := &node{minLen: -1, maxLen: -1, minProps: -1, maxProps: -1, minItems: -1, maxItems: -1}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			n.types |= typeNames[name]
		}
	}
	if s.Enum != nil {
		list, ok := lits(s.Enum.Values)
		if !ok {
			return nil, false
		}
		n.enums = append(n.enums, list)
	}
	if s.Const != nil {
		list, ok := lits([]any{*s.Const})
		if !ok {
			return nil, false
		}
		n.enums = append(n.enums, list)
	}
	if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil {
		n.bounds = newBounds(s)
	}
	n.minLen, n.maxLen = count(s.MinLength), count(s.MaxLength)
	if s.Pattern != nil {
		if n.re, ok = s.Pattern.(*regexp.Regexp); !ok {
			return nil, false
		}
	}
	if !c.object(n, obj, s) || !c.array(n, obj, s) {
		return nil, false
	}
	if !c.applicators(n, obj, s) {
		return nil, false
	}
	if ref, ok := obj["$ref"]; ok {
		target, ok := c.ref(ref, s.Ref)
		if !ok {
			return nil, false
		}
		if n.isPlain() {
			return target, true
		}
		n.all = append(n.all, target)
	}
	n.plain = n.isPlain()
	return n, true
}

func (c *fastCompiler) object(n *node, obj map[string]any, s *jsonschema.Schema) bool {
	n.minProps, n.maxProps = count(s.MinProperties), count(s.MaxProperties)
	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.props = map[string]prop{}
	}
	docProps, _ := obj["properties"].(map[string]any)
	for name, sub := range s.Properties {
		d, ok := docProps[name]
		if !ok {
			return false
		}
		p, ok := c.compile(d, sub, false)
		if !ok {
			return false
		}
		n.props[name] = prop{sub: p}
	}
	if len(s.Required) > 64 {
		return false
	}
	for i, name := range s.Required {
		p := n.props[name]
		p.bit |= 1 << i
		n.props[name] = p
		n.required |= 1 << i
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		if !a {
			n.extra = rejectNode
		}
	case *jsonschema.Schema:
		p, ok := c.compile(obj["additionalProperties"], a, false)
		if !ok {
			return false
		}
		if !p.plain {
			n.extra = p
		}
	default:
		return false
	}
	// Counting distinct keys compares each key with those met, so a large minProperties is left out.
	return n.minProps <= 64
}

func (c *fastCompiler) array(n *node, obj map[string]any, s *jsonschema.Schema) bool {
	n.minItems, n.maxItems = count(s.MinItems), count(s.MaxItems)
	if s.Items2020 == nil {
		return true
	}
	items, ok := c.compile(obj["items"], s.Items2020, false)
	if ok && !items.plain {
		n.items = items
	}
	return ok
}

func (c *fastCompiler) applicators(n *node, obj map[string]any, s *jsonschema.Schema) bool {
	for _, kw := range []struct {
		name string
		subs []*jsonschema.Schema
		to   *[]*node
	}{{"allOf", s.AllOf, &n.all}, {"anyOf", s.AnyOf, &n.anyOf}} {
		docs, _ := obj[kw.name].([]any)
		if len(docs) != len(kw.subs) {
			return false
		}
		for i, sub := range kw.subs {
			p, ok := c.compile(docs[i], sub, false)
			if !ok {
				return false
			}
			*kw.to = append(*kw.to, p)
		}
	}
	return true
}

// ref compiles a $ref to a definition at the root, "#/$defs/name", where name needs no escaping in a
// JSON pointer nor in a URL. Cycles are left to the library.
func (c *fastCompiler) ref(ref any, s *jsonschema.Schema) (*node, bool) {
	r, _ := ref.(string)
	const prefix = "#/$defs/"
	if len(r) <= len(prefix) || r[:len(prefix)] != prefix || s == nil {
		return nil, false
	}
	name := r[len(prefix):]
	for _, ch := range name {
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '_' || ch == '-') {
			return nil, false
		}
	}
	doc, ok := c.defs[name]
	if !ok || c.busy[name] || s.Location != schemaURL+r {
		return nil, false
	}
	c.busy[name] = true
	defer delete(c.busy, name)
	return c.compile(doc, s, false)
}

// lits converts enum or const values, none of which may be an object or an array.
func lits(values []any) ([]lit, bool) {
	list := make([]lit, 0, len(values))
	for _, v := range values {
		switch v := v.(type) {
		case string:
			list = append(list, lit{kind: '"', s: v})
		case json.Number:
			// The library compares numbers exactly, and none to one it cannot read.
			r, ok := rat([]byte(v))
			if !ok {
				return nil, false
			}
			list = append(list, lit{kind: '0', num: r})
		case bool:
			if v {
				list = append(list, lit{kind: 't'})
			} else {
				list = append(list, lit{kind: 'f'})
			}
		case nil:
			list = append(list, lit{kind: 'n'})
		default:
			return nil, false
		}
	}
	return list, true
}

func count(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func (n *node) isPlain() bool {
	return !n.reject && n.types == 0 && len(n.all) == 0 && len(n.anyOf) == 0 && len(n.enums) == 0 &&
		n.bounds == nil && n.minLen < 0 && n.maxLen < 0 && n.re == nil && n.props == nil && n.extra == nil &&
		n.minProps < 0 && n.maxProps < 0 && n.items == nil && n.minItems < 0 && n.maxItems < 0
}

// accepts reports whether raw is a body the schema certainly accepts.
func (n *node) accepts(raw []byte) bool {
	s := scanner{data: raw}
	s.space()
	if !s.check(n) {
		return false
	}
	s.space()
	return s.pos == len(raw)
}

// check scans one value, reporting whether it satisfies n (and is well formed).
func (s *scanner) check(n *node) bool {
	if n.plain {
		return s.skip()
	}
	if n.reject {
		return false
	}
	if len(n.all) > 0 || len(n.anyOf) > 0 {
		// Each subschema scans the value again, from the same place.
		start, depth, keys := s.pos, s.depth, len(s.keys)
		back := func() { s.pos, s.depth, s.keys = start, depth, s.keys[:keys] }
		for _, sub := range n.all {
			if !s.check(sub) {
				return false
			}
			back()
		}
		if len(n.anyOf) > 0 {
			ok := false
			for _, sub := range n.anyOf {
				ok = s.check(sub)
				back()
				if ok {
					break
				}
			}
			if !ok {
				return false
			}
		}
	}
	switch c := s.peek(); c {
	case '{':
		return n.types.has(typeObject) && len(n.enums) == 0 && s.object(n)
	case '[':
		return n.types.has(typeArray) && len(n.enums) == 0 && s.array(n)
	case '"':
		return n.types.has(typeString) && s.string(n)
	case 't', 'f', 'n':
		t, word := typeBoolean, "true"
		if c == 'f' {
			word = "false"
		} else if c == 'n' {
			t, word = typeNull, "null"
		}
		return n.types.has(t) && s.literal(word) && n.allowed(c, nil)
	}
	return s.num(n)
}

// allowed reports whether every enum and const of n holds the value of kind c: for a string, v is its
// value, for a number its text.
func (n *node) allowed(c byte, v []byte) bool {
	var r *big.Rat
	for _, list := range n.enums {
		found := false
		for _, l := range list {
			switch {
			case l.kind != c:
				continue
			case c == '"':
				found = l.s == string(v)
			case c == '0':
				if r == nil {
					var ok bool
					if r, ok = rat(v); !ok {
						return false
					}
				}
				found = r.Cmp(l.num) == 0
			default:
				found = true
			}
			if found {
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (s *scanner) string(n *node) bool {
	content, plain, ok := s.str()
	if !ok {
		return false
	}
	if n.minLen < 0 && n.maxLen < 0 && n.re == nil && len(n.enums) == 0 {
		return true
	}
	v := s.text(content, plain)
	if n.minLen >= 0 || n.maxLen >= 0 {
		length := len(v)
		if !plain {
			length = utf8.RuneCount(v)
		}
		if length < n.minLen || n.maxLen >= 0 && length > n.maxLen {
			return false
		}
	}
	return (n.re == nil || n.re.Match(v)) && n.allowed('"', v)
}

func (s *scanner) num(n *node) bool {
	start := s.pos
	integer, ok := s.number()
	if !ok {
		return false
	}
	text := s.data[start:s.pos]
	if !n.types.has(typeNumber) && (!n.types.has(typeInteger) || !integer && !isIntegral(text)) {
		return false
	}
	return (n.bounds == nil || n.bounds.contain(text)) && n.allowed('0', text)
}

func (s *scanner) object(n *node) bool {
	if !s.enter() {
		return false
	}
	var seen uint64
	members, distinct := 0, 0
	keys := len(s.keys)
	for first := true; ; first = false {
		more, ok := s.more('}', first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		content, plain, ok := s.key()
		if !ok {
			return false
		}
		sub := n.extra
		if n.props != nil {
			if p, ok := n.props[string(s.text(content, plain))]; ok {
				seen |= p.bit
				if p.sub != nil {
					sub = p.sub
				}
			}
		}
		if distinct < n.minProps && plain && s.newKey(content, keys) {
			// A key that repeats counts once, as the decoder keeps its last value only. Keys that are
			// not plain are not counted: the count may fall short, never over.
			distinct++
		}
		members++
		if sub == nil {
			ok = s.skip()
		} else {
			ok = s.check(sub)
		}
		if !ok {
			return false
		}
	}
	s.keys = s.keys[:keys]
	// With a key repeated, each of its values was checked: more than the library checks, never less.
	return seen&n.required == n.required && distinct >= n.minProps && (n.maxProps < 0 || members <= n.maxProps)
}

// newKey records the plain key at content among the distinct keys of the object, from keys on, if new.
func (s *scanner) newKey(content span, keys int) bool {
	key := s.data[content.start:content.end]
	for _, k := range s.keys[keys:] {
		if string(s.data[k.start:k.end]) == string(key) {
			return false
		}
	}
	s.keys = append(s.keys, content)
	return true
}

func (s *scanner) array(n *node) bool {
	if !s.enter() {
		return false
	}
	items := 0
	for first := true; ; first = false {
		more, ok := s.more(']', first)
		if !ok {
			return false
		}
		if !more {
			break
		}
		items++
		if n.items == nil {
			ok = s.skip()
		} else {
			ok = s.check(n.items)
		}
		if !ok {
			return false
		}
	}
	return items >= n.minItems && (n.maxItems < 0 || items <= n.maxItems)
}

// bounds are a schema's numeric bounds. The library compares numbers exactly, as rationals; so does
// contain, reading short decimals without big numbers: an integer v is within bounds when lo <= v <= hi
// and, when all bounds are integers, a number that is not one is when fracLo <= its floor <= fracHi.
type bounds struct {
	min, max, exMin, exMax *big.Rat
	lo, hi                 int64
	integers               bool
	fracLo, fracHi         int64
}

// maxShort is beyond any integer of at most 18 digits, which is all contain reads as int64.
const maxShort = 1 << 62

func newBounds(s *jsonschema.Schema) *bounds {
	b := &bounds{min: s.Minimum, max: s.Maximum, exMin: s.ExclusiveMinimum, exMax: s.ExclusiveMaximum,
		lo: -maxShort, hi: maxShort, integers: true, fracLo: -maxShort, fracHi: maxShort}
	one := big.NewInt(1)
	for _, r := range []*big.Rat{b.min, b.max, b.exMin, b.exMax} {
		b.integers = b.integers && (r == nil || r.IsInt())
	}
	// For an integer bound m and a number x strictly between f and f+1: x >= m and x > m mean f >= m,
	// x <= m and x < m mean f < m.
	if b.min != nil {
		b.lo = max(b.lo, clamp(ceil(b.min)))
		b.fracLo = max(b.fracLo, clamp(floor(b.min)))
	}
	if b.exMin != nil {
		b.lo = max(b.lo, clamp(new(big.Int).Add(floor(b.exMin), one)))
		b.fracLo = max(b.fracLo, clamp(floor(b.exMin)))
	}
	if b.max != nil {
		b.hi = min(b.hi, clamp(floor(b.max)))
		b.fracHi = min(b.fracHi, clamp(new(big.Int).Sub(floor(b.max), one)))
	}
	if b.exMax != nil {
		b.hi = min(b.hi, clamp(new(big.Int).Sub(ceil(b.exMax), one)))
		b.fracHi = min(b.fracHi, clamp(new(big.Int).Sub(floor(b.exMax), one)))
	}
	return b
}

func floor(r *big.Rat) *big.Int { return new(big.Int).Div(r.Num(), r.Denom()) } // Euclidean: Denom > 0

func ceil(r *big.Rat) *big.Int {
	neg := new(big.Rat).Neg(r)
	return new(big.Int).Neg(floor(neg))
}

func clamp(i *big.Int) int64 {
	switch {
	case i.Cmp(big.NewInt(maxShort)) > 0:
		return maxShort
	case i.Cmp(big.NewInt(-maxShort)) < 0:
		return -maxShort
	}
	return i.Int64()
}

// contain reports whether the number written as text is within the bounds.
func (b *bounds) contain(text []byte) bool {
	if whole, fraction, ok := decimal(text); ok {
		if !fraction {
			return b.lo <= whole && whole <= b.hi
		}
		if b.integers {
			floor := whole
			if text[0] == '-' {
				floor--
			}
			return b.fracLo <= floor && floor <= b.fracHi
		}
	}
	r, ok := rat(text)
	if !ok {
		return false
	}
	return (b.min == nil || r.Cmp(b.min) >= 0) && (b.max == nil || r.Cmp(b.max) <= 0) &&
		(b.exMin == nil || r.Cmp(b.exMin) > 0) && (b.exMax == nil || r.Cmp(b.exMax) < 0)
}

// maxDecimal bounds the texts read without big numbers. The library reads no number with more than a
// million digits after the point; those are left to it.
const maxDecimal = 64

// decimal reads a number written without an exponent and with at most 18 digits before the point: whole
// is its integer part (truncated toward zero), fraction whether it has a nonzero fractional part.
func decimal(text []byte) (whole int64, fraction, ok bool) {
	if len(text) > maxDecimal {
		return 0, false, false
	}
	digits, frac, _ := bytes.Cut(text, []byte("."))
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) > 18 || bytes.IndexAny(frac, "eE") >= 0 || bytes.IndexAny(digits, "eE") >= 0 {
		return 0, false, false
	}
	for _, c := range digits {
		whole = whole*10 + int64(c-'0')
	}
	if neg {
		whole = -whole
	}
	return whole, len(bytes.TrimRight(frac, "0")) > 0, true
}

// rat is a number's exact value, as the library reads it; not for long texts, nor for exponents of more
// than 4 digits, which are slow to expand and which the library may not read.
func rat(text []byte) (*big.Rat, bool) {
	if len(text) > maxDecimal {
		return nil, false
	}
	if i := bytes.IndexAny(text, "eE"); i >= 0 {
		exp := bytes.TrimLeft(text[i+1:], "+-")
		if len(exp) > 4 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(string(text))
}

// isIntegral reports whether a number with a fraction or an exponent is an integer, as the library does.
func isIntegral(text []byte) bool {
	if _, fraction, ok := decimal(text); ok {
		return !fraction
	}
	r, ok := rat(text)
	return ok && r.IsInt()
}
