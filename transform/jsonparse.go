package transform

import (
	"strconv"
	"unicode/utf8"

	"github.com/adal-relay/adal/internal/jsontext"
	"github.com/dop251/goja"
)

// maxParseDepth bounds the nesting parseJSON follows; a deeper body is left to JSON.parse.
const maxParseDepth = 256

// parseJSON builds from b, which jsontext.Valid accepted, the value JSON.parse gives, with the runtime's own
// constructors: goja's JSON.parse reads through encoding/json's token API, several times slower. ok false
// leaves b to JSON.parse: an object key that is __proto__, starts with a digit or repeats in its object, a
// number beyond float64, nesting deeper than maxParseDepth.
func (s *sandbox) parseJSON(b []byte) (v goja.Value, ok bool) {
	p := jsonParser{vm: s.vm, b: b}
	p.i = jsontext.Space(b, 0)
	v, ok = p.value(0)
	return v, ok && jsontext.Space(b, p.i) == len(b)
}

type jsonParser struct {
	vm  *goja.Runtime
	b   []byte
	i   int
	buf []byte // scratch for decoding strings
}

func (p *jsonParser) value(depth int) (goja.Value, bool) {
	if p.i >= len(p.b) || depth > maxParseDepth {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return p.vm.ToValue(s), true
	case c == 't':
		p.i += len("true")
		return p.vm.ToValue(true), true
	case c == 'f':
		p.i += len("false")
		return p.vm.ToValue(false), true
	case c == 'n':
		p.i += len("null")
		return goja.Null(), true
	}
	end, _, ok := jsontext.NumberEnd(p.b, p.i)
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(p.b[p.i:end]), 64)
	if err != nil {
		return nil, false // out of range: JSON.parse refuses it as encoding/json does
	}
	p.i = end
	return p.vm.ToValue(f), true
}

func (p *jsonParser) object(depth int) (goja.Value, bool) {
	obj := p.vm.NewObject()
	p.i = jsontext.Space(p.b, p.i+1)
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return obj, true
	}
	var keys []string
	for {
		key, ok := p.str()
		if !ok || key == "" || key == "__proto__" || key[0] >= '0' && key[0] <= '9' {
			return nil, false
		}
		for _, k := range keys {
			if k == key {
				return nil, false
			}
		}
		keys = append(keys, key)
		p.i = jsontext.Space(p.b, p.i) + 1 // past the colon
		p.i = jsontext.Space(p.b, p.i)
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		if err := obj.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			return nil, false
		}
		if end, ok := p.after('}'); !ok || end {
			return obj, ok
		}
	}
}

// after moves past the comma or the closing byte that follows a member, reporting end at the closing one.
func (p *jsonParser) after(closing byte) (end, ok bool) {
	p.i = jsontext.Space(p.b, p.i)
	if p.i >= len(p.b) {
		return false, false
	}
	c := p.b[p.i]
	p.i = jsontext.Space(p.b, p.i+1)
	return c == closing, true
}

func (p *jsonParser) array(depth int) (goja.Value, bool) {
	p.i = jsontext.Space(p.b, p.i+1)
	var items []any
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return p.vm.NewArray(), true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		items = append(items, v)
		if end, ok := p.after(']'); !ok {
			return nil, false
		} else if end {
			return p.vm.NewArray(items...), true
		}
	}
}

// str reads the string at i, decoded as encoding/json decodes it.
func (p *jsonParser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
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
