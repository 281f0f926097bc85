package filter

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Input is one request as rules see it. Its body is parsed on first use, at most once, whatever the number of
// rules evaluated against it; a request no rule asks about the body of is never parsed. Not safe for
// concurrent use.
type Input struct {
	Method string
	// Path is what followed the inbound key ("" or "/…"); Query the raw query string.
	Path   string
	Query  string
	Header http.Header
	Body   []byte

	body      any
	bodyDone  bool
	query     url.Values
	queryDone bool
}

// resolve returns the values at p: none when the path leads nowhere, several when it crosses an array (a
// segment that is not an index applies to each element) or names a repeated header or query parameter.
func (in *Input) resolve(p path) []any {
	switch p.root {
	case rootMethod:
		return []any{in.Method}
	case rootPath:
		return []any{in.Path}
	case rootQuery:
		if len(p.segments) == 0 {
			return []any{in.Query}
		}
		return strings2any(in.parsedQuery()[p.segments[0]])
	case rootHeaders:
		if len(p.segments) == 0 {
			return []any{in.headerObject()}
		}
		return strings2any(in.headerValues(p.segments[0]))
	}
	vals := []any{in.parsedBody()}
	if len(p.segments) > 0 {
		if _, ok := vals[0].(string); ok {
			return nil // a body that is not JSON has no fields
		}
	}
	for _, seg := range p.segments {
		next := vals[:0:0]
		for _, v := range vals {
			next = step(next, v, seg)
		}
		if len(next) == 0 {
			return nil
		}
		vals = next
	}
	return vals
}

// step appends to out what seg finds under v: an object's field; an array's element at an index, or each
// element's field.
func step(out []any, v any, seg string) []any {
	switch x := v.(type) {
	case map[string]any:
		if f, ok := x[seg]; ok {
			out = append(out, f)
		}
	case []any:
		if i, err := strconv.Atoi(seg); err == nil {
			if i >= 0 && i < len(x) {
				out = append(out, x[i])
			}
			return out
		}
		for _, e := range x {
			if obj, ok := e.(map[string]any); ok {
				if f, ok := obj[seg]; ok {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// parsedBody is the body as JSON when it is JSON (numbers kept exact), else as text; a body over
// MaxBodyParsed is text.
func (in *Input) parsedBody() any {
	if in.bodyDone {
		return in.body
	}
	in.bodyDone = true
	in.body = string(in.Body)
	if len(in.Body) > MaxBodyParsed {
		return in.body
	}
	trimmed := bytes.TrimLeft(in.Body, " \t\r\n")
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return in.body
	}
	dec := json.NewDecoder(bytes.NewReader(in.Body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return in.body
	}
	if _, err := dec.Token(); err != io.EOF {
		return in.body
	}
	in.body = v
	return v
}

func (in *Input) parsedQuery() url.Values {
	if !in.queryDone {
		in.queryDone = true
		in.query, _ = url.ParseQuery(in.Query) // what parses of a malformed query still counts
	}
	return in.query
}

// headerValues are the values of the header named name, whatever the case of its name as stored.
func (in *Input) headerValues(name string) []string {
	if vs := in.Header.Values(name); len(vs) > 0 {
		return vs
	}
	for k, vs := range in.Header {
		if strings.EqualFold(k, name) {
			return vs
		}
	}
	return nil
}

// headerObject is the headers as an object of lower-case names, repeated values joined as HTTP joins them.
func (in *Input) headerObject() map[string]any {
	out := make(map[string]any, len(in.Header))
	for k, vs := range in.Header {
		out[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out
}

func strings2any(vs []string) []any {
	if len(vs) == 0 {
		return nil
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
