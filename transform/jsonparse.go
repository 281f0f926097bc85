package transform

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/adal-relay/adal/internal/jsontext"
	"github.com/dop251/goja"
)

// maxParseDepth bounds the nesting parseValue follows; a deeper body is left to the engine.
const maxParseDepth = 256

// parseValue reads JSON text that jsontext.Valid accepted into the value the engine has once JSON.parse
// read it: strings decoded, numbers as JavaScript writes them (written gives -0 as 0). Plans read bodies
// with it; runtimes build their parsed bodies with the same parser (parseJSON). ok false leaves the text to
// the engine where the two could differ: a repeated key, a key that is empty, __proto__ or starts with a
// digit (JavaScript orders those apart), nesting deeper than maxParseDepth, and, for a plan, a number
// JavaScript writes with an exponent.
func parseValue(raw []byte) (value, bool) {
	return parseWith(raw, treeSink{})
}

// sink makes the values a parse reads: a plan's own, or a runtime's.
type sink[V any] interface {
	str(s string) V
	// number is a number as written in the text; integer if without a fraction or an exponent.
	number(text string, integer bool) (V, bool)
	literal(text string) V // true, false or null
	array(items []V) V
	object(keys []string, values []V) (V, bool)
}

func parseWith[V any](raw []byte, to sink[V]) (V, bool) {
	p := treeParser[V]{b: raw, i: jsontext.Space(raw, 0), to: to}
	return p.value(0)
}

type treeParser[V any] struct {
	b   []byte
	i   int
	buf []byte // scratch for decoding strings
	to  sink[V]
}

func (p *treeParser[V]) value(depth int) (v V, ok bool) {
	if p.i >= len(p.b) || depth > maxParseDepth {
		return v, false
	}
	switch c := p.b[p.i]; c {
	case '{', '[':
		return p.container(c, depth)
	case '"':
		s, ok := p.str()
		return p.to.str(s), ok
	case 't', 'f', 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		p.i += len(lit)
		return p.to.literal(lit), true
	}
	end, integer, ok := jsontext.NumberEnd(p.b, p.i)
	if !ok {
		return v, false
	}
	text := string(p.b[p.i:end])
	p.i = end
	return p.to.number(text, integer)
}

func (p *treeParser[V]) container(open byte, depth int) (v V, ok bool) {
	closing := byte('}')
	if open == '[' {
		closing = ']'
	}
	var keys []string
	var items []V
	p.i = jsontext.Space(p.b, p.i+1)
	more := p.i >= len(p.b) || p.b[p.i] != closing
	if !more {
		p.i++
	}
	for more {
		if open == '{' {
			k, ok := p.str()
			if !ok || k == "" || k == "__proto__" || k[0] >= '0' && k[0] <= '9' || slices.Contains(keys, k) {
				return v, false
			}
			keys = append(keys, k)
			p.i = jsontext.Space(p.b, jsontext.Space(p.b, p.i)+1) // past the colon
		}
		item, ok := p.value(depth + 1)
		if !ok {
			return v, false
		}
		items = append(items, item)
		if p.i = jsontext.Space(p.b, p.i); p.i >= len(p.b) {
			return v, false
		}
		more = p.b[p.i] != closing // else a comma
		p.i = jsontext.Space(p.b, p.i+1)
	}
	if open == '[' {
		return p.to.array(items), true
	}
	return p.to.object(keys, items)
}

// treeSink makes a plan's values.
type treeSink struct{}

func (treeSink) str(s string) value        { return stringValue(s) }
func (treeSink) literal(text string) value { return jsonValue(text) }
func (treeSink) array(items []value) value { return collect(valArray, nil, items) }
func (treeSink) number(text string, integer bool) (value, bool) {
	text, ok := jsNumber(text, integer)
	return jsonValue(text), ok
}

func (treeSink) object(keys []string, values []value) (value, bool) {
	return collect(valObject, keys, values), true
}

func collect(kind valueKind, keys []string, items []value) value {
	v := value{kind: kind, keys: keys, elems: items, size: 2}
	for i, item := range items {
		key := ""
		if keys != nil {
			key = keys[i]
		}
		v.size += v.memberSize(key, item)
	}
	return v
}

// str reads the string at i, decoded as encoding/json (and so JSON.parse) decodes it.
func (p *treeParser[V]) str() (string, bool) {
	end, ok := jsontext.StringEnd(p.b, p.i)
	if !ok {
		return "", false
	}
	q := p.b[p.i+1 : end-1]
	p.i = end
	for _, c := range q {
		if c == '\\' || c >= utf8.RuneSelf {
			p.buf = jsontext.AppendUnquoted(p.buf[:0], q)
			return string(p.buf), true
		}
	}
	return string(q), true
}

// jsNumber is a JSON number as JavaScript writes it once read: an integer of up to 15 digits as it is, any
// other number by its shortest decimal, which is JavaScript's own between 1e-6 and 1e21; ok false outside.
// A negative zero is "-0", which JSON.parse keeps.
func jsNumber(text string, integer bool) (string, bool) {
	if integer && len(strings.TrimPrefix(text, "-")) <= 15 {
		return text, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return "", false
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0", true
		}
		return "0", true
	}
	if a := math.Abs(f); a < 1e-6 || a >= 1e21 {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}

// parseJSON builds from b, which jsontext.Valid accepted, the value JSON.parse gives, with the runtime's own
// constructors: goja's JSON.parse reads through encoding/json's token API, several times slower. ok false
// leaves b to JSON.parse (see parseValue).
func (s *sandbox) parseJSON(b []byte) (goja.Value, bool) {
	return parseWith(b, runtimeSink{s.vm})
}

// runtimeSink makes a runtime's values as JSON.parse would: data properties, writable, enumerable and
// configurable, defined rather than set, so that no setter on Object.prototype runs.
type runtimeSink struct{ vm *goja.Runtime }

func (r runtimeSink) str(s string) goja.Value { return r.vm.ToValue(s) }

// number is left to JSON.parse when it is beyond float64, which JSON.parse refuses as encoding/json does.
func (r runtimeSink) number(text string, _ bool) (goja.Value, bool) {
	f, err := strconv.ParseFloat(text, 64)
	return r.vm.ToValue(f), err == nil
}

func (r runtimeSink) literal(text string) goja.Value {
	switch text {
	case "true":
		return r.vm.ToValue(true)
	case "false":
		return r.vm.ToValue(false)
	}
	return goja.Null()
}

func (r runtimeSink) array(items []goja.Value) goja.Value {
	list := make([]any, len(items))
	for i, item := range items {
		list[i] = item
	}
	return r.vm.NewArray(list...)
}

func (r runtimeSink) object(keys []string, values []goja.Value) (goja.Value, bool) {
	obj := r.vm.NewObject()
	for i, k := range keys {
		if obj.DefineDataProperty(k, values[i], goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE) != nil {
			return nil, false
		}
	}
	return obj, true
}
