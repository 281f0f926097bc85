package transform

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"github.com/adal-relay/adal/internal/jsontext"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/adal-relay/adal/webhook"
	"github.com/dop251/goja"
)

// request builds the request object. It runs before the tenant's code, so
// no getter or setter of theirs is involved yet.
func (s *sandbox) request(in Request) (*goja.Object, error) {
	vm := s.vm
	body, err := s.body(in.Body)
	if err != nil {
		return nil, err
	}
	headers := vm.NewObject()
	for _, h := range joinHeaders(in.Header) {
		if err := headers.Set(h.key, h.value); err != nil {
			return nil, err
		}
	}
	req := vm.NewObject()
	for _, f := range []struct {
		name  string
		value any
	}{
		{"method", validUTF8(in.Method)},
		{"path", validUTF8(in.Path)},
		{"query", validUTF8(in.Query)},
		{"headers", headers},
		{"body", body},
	} {
		if err := req.Set(f.name, f.value); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// header is a property of the request's headers object.
type header struct{ key, value string }

// joinHeaders is the request's headers as the transform sees them: lower-case names, in order, each with
// its values joined. The names of an http.Header are distinct, but not always once lower-cased (a name set
// without canonicalization), so the values of equal ones are joined too.
func joinHeaders(h http.Header) []header {
	type name struct{ lower, name string }
	names := make([]name, 0, len(h))
	for n := range h {
		names = append(names, name{strings.ToLower(n), n})
	}
	slices.SortFunc(names, func(a, b name) int {
		return cmp.Or(strings.Compare(a.lower, b.lower), strings.Compare(a.name, b.name))
	})
	out := make([]header, 0, len(names))
	for i := 0; i < len(names); {
		lower, values := names[i].lower, h[names[i].name]
		for i++; i < len(names) && names[i].lower == lower; i++ {
			values = append(slices.Clip(values), h[names[i].name]...)
		}
		out = append(out, header{validUTF8(lower), validUTF8(strings.Join(values, ", "))})
	}
	return out
}

// body is the parsed JSON when the body is JSON, else the body as a string. A JSON object is parsed when
// the transform first looks into it (see lazyHandler in the guards).
func (s *sandbox) body(b []byte) (goja.Value, error) {
	s.pending = nil
	if jsontext.Valid(b) {
		if t := bytes.TrimSpace(b); s.lazy && len(t) > 0 && t[0] == '{' {
			target := s.vm.NewObject()
			if err := target.SetSymbol(s.rawSym, string(t)); err != nil {
				return nil, err
			}
			proxy, err := s.vm.New(s.proxy, target, s.lazyHandler)
			if err != nil {
				return nil, err
			}
			s.pending = &lazyBody{raw: t, target: target, proxy: proxy}
			return proxy, nil
		}
		if !s.noParse {
			if v, ok := s.parseJSON(b); ok {
				return v, nil
			}
		}
		v, err := s.parse(goja.Undefined(), s.vm.ToValue(string(b)))
		if err == nil {
			return v, nil
		}
		if isStop(err) {
			return nil, err
		}
	}
	return s.vm.ToValue(validUTF8(string(b))), nil
}

// serializeBody is the JSON of a returned body, nil when it has none (a function, undefined). Where the
// request's body appears untouched, its own bytes are spliced in, and so are the long strings that replace
// took out, quoted here.
func (s *sandbox) serializeBody(v goja.Value) ([]byte, error) {
	b := s.pending
	if b != nil && !b.touched && b.proxy.SameAs(v) {
		return b.raw, nil
	}
	s.stash = s.stash[:0]
	j, err := s.serialize(goja.Undefined(), v, s.replacer)
	if err != nil {
		if e := s.stopped.Load(); e != nil {
			return nil, e
		}
		return nil, err
	}
	if !goja.IsString(j) {
		return nil, nil
	}
	text := j.String()
	quoted := `"` + s.marker
	if !strings.Contains(text, quoted) {
		return []byte(text), nil
	}
	out := make([]byte, 0, len(text))
	for {
		k := strings.Index(text, quoted)
		if k < 0 {
			return append(out, text...), nil
		}
		out, text = append(out, text[:k]...), text[k+len(quoted):]
		switch end := strings.IndexByte(text, '"'); {
		case end == 0 && b != nil:
			out = append(out, b.raw...)
		case end > 1 && text[0] == '-':
			n, err := strconv.Atoi(text[1:end])
			if err != nil || n >= len(s.stash) {
				return nil, errors.New("the body has a string the host did not expect")
			}
			out = jsontext.AppendQuoted(out, s.stash[n])
		default:
			out = append(out, quoted...) // a string that only starts as a marker: kept as it is
			continue
		}
		text = text[strings.IndexByte(text, '"')+1:]
		if int64(len(out)) > s.lim.Memory {
			return nil, bodyTooLarge(int64(len(out)), s.lim.Memory)
		}
	}
}

// stashFrom is the length from which replace takes a string out: goja quotes a string a character at a
// time, several times slower than the host, which gains over the cost of the marker from about here.
const stashFrom = 32

// replace is the replacer of the result's serialization. It ends a stopped run's serialization, and
// replaces a long string with a marker that serializeBody replaces with the string, quoted. A string in
// which a lone surrogate may have been replaced when it was read is left to the engine, which writes it
// as an escape.
func (s *sandbox) replace(call goja.FunctionCall) goja.Value {
	if s.stopped.Load() != nil {
		panic(s.vm.NewGoError(errors.New("the run was stopped")))
	}
	v := call.Argument(1)
	if str, ok := v.(goja.String); ok && str.Length() >= stashFrom {
		if text := str.String(); text != s.marker && !strings.ContainsRune(text, utf8.RuneError) {
			s.stash = append(s.stash, text)
			return s.vm.ToValue(s.marker + "-" + strconv.Itoa(len(s.stash)-1))
		}
	}
	return v
}

// bodyTooLarge is a result whose body, with the request's body in it as many times as it is, goes over
// the memory limit.
func bodyTooLarge(size, limit int64) *Error {
	return &Error{Reason: ReasonMemory, Message: fmt.Sprintf("the body returned would be %s, over the memory limit of %s",
		formatBytes(size), formatBytes(limit))}
}

func validUTF8(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

const nothing = "transform returned nothing: return the request, or null to cancel the delivery"

func resultError(format string, args ...any) result {
	return result{err: resultErr(format, args...)}
}

// result reads what the transform returned. It runs inside guard: reading a
// property may run the tenant's code.
func (s *sandbox) result(v goja.Value, in Request) result {
	if v == nil || goja.IsUndefined(v) {
		return result{err: &Error{Reason: ReasonResult, Message: nothing}}
	}
	if goja.IsNull(v) {
		return result{cancel: true}
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() == "Array" || obj.ClassName() == "Function" || obj.ClassName() == "Promise" {
		return resultError("transform returned %s, not a request: return the request, or null to cancel the delivery", typeName(v))
	}
	out := in

	if v := field(obj, "method"); v != nil {
		m, ok := str(v)
		if !ok {
			return resultError("method must be a string, not %s", typeName(v))
		}
		if e := checkMethod(m); e != nil {
			return result{err: e}
		}
		out.Method = m
	}
	if v := field(obj, "path"); v != nil {
		p, ok := str(v)
		if !ok {
			return resultError("path must be a string, not %s", typeName(v))
		}
		if e := checkPath(p); e != nil {
			return result{err: e}
		}
		out.Path = p
	}
	if v := field(obj, "query"); v != nil {
		q, ok := str(v)
		if !ok {
			return resultError("query must be a string, not %s", typeName(v))
		}
		q, e := checkQuery(q)
		if e != nil {
			return result{err: e}
		}
		out.Query = q
	}
	if v := field(obj, "headers"); v != nil {
		h, r, ok := headers(v)
		if !ok {
			return r
		}
		out.Header = h
	} else {
		out.Header = in.Header.Clone()
		if out.Header == nil {
			out.Header = http.Header{}
		}
	}
	if v := field(obj, "body"); v != nil {
		if b, ok := str(v); ok {
			out.Body = []byte(b)
		} else {
			text, err := s.serializeBody(v)
			if e, ok := err.(*Error); ok {
				return result{err: e}
			}
			if err != nil {
				rethrowStop(err)
				var msg string
				if ex, ok := err.(*goja.Exception); ok {
					msg = s.valueText(ex.Value())
				} else {
					msg = err.Error()
				}
				return resultError("the body cannot be serialized as JSON: %s", truncate(msg, maxMessage))
			}
			if text == nil {
				return resultError("the body cannot be serialized as JSON: it is %s", typeName(v))
			}
			out.Body = text
			defaultContentType(out.Header)
		}
	}
	return result{out: out}
}

// defaultContentType marks a body serialized as JSON, unless the headers say what it is.
func defaultContentType(h http.Header) {
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
}

func resultErr(format string, args ...any) *Error {
	return &Error{Reason: ReasonResult, Message: fmt.Sprintf(format, args...)}
}

func checkMethod(m string) *Error {
	if !webhook.ValidHeaderName(m) {
		return resultErr("method %q is not a valid HTTP method", m)
	}
	return nil
}

func checkPath(p string) *Error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return resultErr("path %q must start with \"/\"", truncate(p, 100))
	case strings.ContainsAny(p, "?#"):
		return resultErr("path %q must not contain \"?\" or \"#\": put the query in request.query", truncate(p, 100))
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return resultErr("path has a control character")
	}
	return nil
}

// checkQuery returns the query without a leading "?".
func checkQuery(q string) (string, *Error) {
	q = strings.TrimPrefix(q, "?")
	if strings.Contains(q, "#") || strings.IndexFunc(q, unicode.IsControl) >= 0 {
		return "", resultErr("query must not contain \"#\" or a control character")
	}
	return q, nil
}

// field is a property of the returned object, or nil when it is missing or
// undefined, to keep the input value.
func field(obj *goja.Object, name string) goja.Value {
	v := obj.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return nil
	}
	return v
}

func str(v goja.Value) (string, bool) {
	if !goja.IsString(v) {
		return "", false
	}
	return v.String(), true
}

func headers(v goja.Value) (http.Header, result, bool) {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() == "Array" || obj.ClassName() == "Function" {
		return nil, resultError("headers must be an object of header name to value, not %s", typeName(v)), false
	}
	h := http.Header{}
	for _, key := range obj.Keys() {
		if !webhook.ValidHeaderName(key) {
			return nil, resultError("header name %q is not valid", truncate(key, 100)), false
		}
		name := http.CanonicalHeaderKey(key)
		val := obj.Get(key)
		var values []string
		if s, ok := str(val); ok {
			values = []string{s}
		} else if arr, ok := val.(*goja.Object); ok && arr.ClassName() == "Array" {
			n := arr.Get("length").ToInteger()
			for i := int64(0); i < n; i++ {
				el := arr.Get(strconv.FormatInt(i, 10))
				s, ok := str(el)
				if !ok {
					return nil, resultError("header %q must be a string or an array of strings, but an element is %s", key, typeName(el)), false
				}
				values = append(values, s)
			}
		} else {
			return nil, resultError("header %q must be a string or an array of strings, not %s", key, typeName(val)), false
		}
		for _, s := range values {
			if !webhook.ValidHeaderValue(s) {
				return nil, resultError("header %q has a line break or another control character in its value", key), false
			}
			h.Add(name, s)
		}
	}
	return h, result{}, true
}
