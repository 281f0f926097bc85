package eventtype

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The bounds of a Source and of the type it reads.
const (
	// MaxSourceLength bounds a header name and a JSON path.
	MaxSourceLength = 255
	// MaxPathSegments bounds the segments of a JSON path: a type sits near the top of a body.
	MaxPathSegments = 16
	// MaxTypeLength bounds the type read from a request: a longer value is no type at all rather than a
	// cut one, which could match a name it does not have.
	MaxTypeLength = 255
)

// Source is where a request's event type is read: the first value of a header, or a scalar in a JSON body
// at a dotted path ("type", "data.object.type", "$.type", "items.0.kind"). Exactly one is set.
type Source struct {
	Header   string
	JSONPath string
}

// Validate reports whether the source is usable, with a message meant for whoever configured it.
func (s Source) Validate() error {
	switch {
	case s.Header == "" && s.JSONPath == "":
		return errors.New("set a header or a JSON path to read the event type from")
	case s.Header != "" && s.JSONPath != "":
		return errors.New("set either a header or a JSON path to read the event type from, not both")
	case s.Header != "":
		return checkHeader(s.Header)
	}
	_, err := parsePath(s.JSONPath)
	return err
}

func checkHeader(name string) error {
	if len(name) > MaxSourceLength {
		return fmt.Errorf("header name is longer than %d characters", MaxSourceLength)
	}
	for _, r := range name {
		if r >= 0x80 || !isTokenChar(byte(r)) {
			return fmt.Errorf("header name %q has %q: use letters, digits and - (as in X-Event-Type)", name, r)
		}
	}
	return nil
}

// isTokenChar is a character of an HTTP token (RFC 9110), the grammar of header names.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parsePath splits a JSON path into its segments. A segment is an object key or, on an array, an index;
// keys take letters, digits and _ - @ $ : so that the usual type fields ("type", "@type", "$type",
// "event_type") can be named.
func parsePath(path string) ([]string, error) {
	if len(path) > MaxSourceLength {
		return nil, fmt.Errorf("JSON path is longer than %d characters", MaxSourceLength)
	}
	p := strings.TrimPrefix(path, "$.")
	if p == "" || p == "$" {
		return nil, fmt.Errorf("JSON path %q names no field: write it as \"type\" or \"data.object.type\"", path)
	}
	segs := strings.Split(p, ".")
	if len(segs) > MaxPathSegments {
		return nil, fmt.Errorf("JSON path %q is deeper than %d fields", path, MaxPathSegments)
	}
	for _, seg := range segs {
		if seg == "" {
			return nil, fmt.Errorf("JSON path %q has an empty field: separate fields with a single dot", path)
		}
		for _, r := range seg {
			if !isKeyChar(r) {
				return nil, fmt.Errorf("JSON path %q has %q: use letters, digits, _ - @ $ : between dots, "+
					"and indexes as \"items.0.kind\"", path, r)
			}
		}
	}
	return segs, nil
}

func isKeyChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("_-@$:", r)
}

// TypeOf is the request's event type, trimmed: the header's first value, or the string or number (as
// written) at the path in a JSON body. It is "" when neither or both are set, the path is invalid, the
// value is absent, the body is not JSON, the value is not a string or a number (a boolean names no type),
// or it is longer than MaxTypeLength.
func (s Source) TypeOf(h http.Header, body []byte) string {
	return s.TypeOfBody(h, NewBody(body))
}

// TypeOfBody is TypeOf of a body that may be decoded already, or later, for validation.
func (s Source) TypeOfBody(h http.Header, body *Body) string {
	var t string
	switch {
	case s.Header != "" && s.JSONPath == "":
		t = h.Get(s.Header)
	case s.JSONPath != "" && s.Header == "":
		t = typeAt(s.JSONPath, body)
	}
	t = strings.TrimSpace(t)
	if len(t) > MaxTypeLength {
		return ""
	}
	return t
}

// typeAt walks the path through the body: through its text when the scanner can read it and it is not
// decoded yet, else through the decoded body.
func typeAt(path string, body *Body) string {
	segs, err := parsePath(path)
	if err != nil {
		return ""
	}
	if !body.decoded && body.scanned >= 0 {
		t, ok := lookup(body.raw, segs)
		if ok {
			body.scanned = 1
			return t
		}
		body.scanned = -1
	}
	v, err := body.value()
	if err != nil {
		return ""
	}
	for _, seg := range segs {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return ""
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) || seg != strconv.Itoa(i) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}
