package eventtype

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/adal-relay/adal/internal/invoice"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastCase is a schema within the fast path's subset, with bodies it must vouch for itself (the library
// accepting them too) and others it may leave to the library.
type fastCase struct {
	schema string
	fast   []string
	others []string
}

var fastCases = []fastCase{
	{`true`, []string{`1`, `{"a": [1, {"b": null}]}`, ` "x" `, "\t[]\r\n"},
		[]string{``, ` `, `{} {}`, `{}x`, `[1,]`, `{"a" 1}`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `tru`, `nul`,
			`"\x"`, `"\'"`, "\"a\x01\"", `"\u12"`, `"\u12g4"`, `[1 2]`, `{"a":1,}`, `{,}`, `[,1]`, `"abc`, `{"a":1`,
			`{1:2}`, `nulll`, `truefalse`, "\xef\xbb\xbf{}", "{}\x00", `[] ]`}},
	{`false`, nil, []string{`1`, `{}`, `null`}},
	{`{}`, []string{`null`, `"\ud83d"`, "\"\xff\"", `-0.5e-3`}, []string{`{"a":}`}},
	{`{"type": "integer"}`, []string{`1`, `-0`, `0`, `1.0`, `1e2`, `1E+2`, `10e-1`, `12345678901234567890`,
		`1e400`, `-1.000`},
		[]string{`1.5`, `1e-2`, `"1"`, `1e2000000`, `1.0e-2000000`, `true`, `null`, `[1]`,
			`1.` + strings.Repeat("0", 70), `1` + strings.Repeat("0", 70) + `.0`}},
	{`{"type": ["number", "null"]}`, []string{`1.5`, `null`, `1e2000000`, `-1e-400`}, []string{`"x"`, `{}`, `false`}},
	{`{"type": "number", "minimum": 0, "maximum": 10}`, []string{`0`, `10`, `5.5`, `1e1`, `0.0`, `-0`, `100e-1`},
		[]string{`-1`, `10.000001`, `-0.0000001`, `11`, `1e400`, `-1e400`, `12345678901234567890.5`, `1e2000000`}},
	{`{"exclusiveMinimum": 1.5, "exclusiveMaximum": 10}`, []string{`2`, `1.51`, `9.99`, `1.5000001`, `"x"`},
		[]string{`1.5`, `1.50`, `15e-1`, `10`, `10.0`, `1e1`, `1`, `-5`, `15e-1000`}},
	{`{"minimum": -2.5, "maximum": 12345678901234567890.5}`,
		[]string{`-2`, `-2.5`, `12345678901234567890`, `12345678901234567890.5`, `123456789012345678`},
		[]string{`-3`, `-2.51`, `12345678901234567891`, `1e20`, `1e400`, `99999999999999999999999`}},
	{`{"maximum": 9223372036854775807, "minimum": -9223372036854775808}`,
		[]string{`9223372036854775807`, `-9223372036854775808`, `0`},
		[]string{`9223372036854775808`, `-9223372036854775809`, `1e19`}},
	{`{"minimum": -3, "maximum": 10}`, []string{`-2.5`, `-0.5`, `-0.0`, `0.0001`, `9.9999`, `10.0`, `-3.0`,
		`-2.999`, `5.000000000000000000000000000000000000000000000000000001`, `123456789012345678e-17`},
		[]string{`-3.5`, `-3.0001`, `10.0001`, `10.5`, `11.0`, `-4`, `1234567890123456789.5`, `-1234567890123456789.5`,
			`1.` + strings.Repeat("0", 70) + `1`, `1e10000`}},
	{`{"exclusiveMinimum": -3, "exclusiveMaximum": 10}`, []string{`-2.5`, `-2.9999`, `9.5`, `0.0`},
		[]string{`-3.0`, `-3`, `-3.5`, `10.0`, `10`, `10.00001`}},
	{`{"type": "integer", "minimum": 1e400}`, nil, []string{`1`, `1e401`, `1e400`}},
	{`{"type": "string", "minLength": 2, "maxLength": 3}`,
		[]string{`"ab"`, `"abc"`, `"éé"`, `"\u00e9\u00e9"`, `"😀😀"`, `"\ud83d\ude00\ud83d\ude00"`, `"\ud83dx"`,
			"\"\xff\xfe\"", `"a\n"`, `"\u0000\u0000"`, `"\ude00\ud83d"`, `"\ud83d\ud83d\ude00"`},
		[]string{`"a"`, `"abcd"`, `"é"`, `"😀"`, `"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", "\"\xed\xa0\x80\"",
			`""`, `"\t\t\t\t"`, `2`}},
	{`{"pattern": "^\\p{L}{2}$"}`, []string{`"éa"`, `"\u00e9a"`, `"Жж"`, `3`}, []string{`"é1"`, `"é"`, `"\ud83dx"`}},
	{`{"pattern": "^.$"}`, []string{`"é"`, `"\u00e9"`, `"\ud83d\ude00"`, "\"\xff\"", `"\ud83d"`},
		[]string{"\"\xff\xff\"", `"ab"`, `"\n"`}},
	{`{"pattern": "^a\\\\b\"c/$"}`, []string{`"a\\b\"c/"`, `"a\\b\"c\/"`, `"\u0061\\b\u0022c/"`}, []string{`"a\b\"c/"`}},
	{`{"pattern": "\\x{FFFD}"}`, []string{"\"\xff\"", `"\ud800"`, `"\ufffd"`}, []string{`"x"`}},
	{`{"enum": ["eur", "é", "a\"b", null, true]}`,
		[]string{`"eur"`, `"é"`, `"\u00e9"`, `"a\"b"`, `"a\u0022b"`, `null`, `true`},
		[]string{`"EUR"`, `false`, `1`, `{}`, `[]`, `"eu"`, `"eurx"`}},
	{`{"const": "invoice.paid"}`, []string{`"invoice.paid"`, `"invoice\u002epaid"`}, []string{`"invoice.paid "`, `1`}},
	{`{"const": null}`, []string{`null`}, []string{`false`, `0`, `""`}},
	{`{"enum": [1, 2.5, "1", 1e400]}`, []string{`1`, `1.0`, `10e-1`, `2.50`, `25e-1`, `"1"`, `1e400`},
		[]string{`2`, `"2.5"`, `1.0000000000000000000001`, `true`, `1e401`}},
	{`{"const": 12345678901234567890}`, []string{`12345678901234567890`, `1.234567890123456789e19`},
		[]string{`12345678901234567891`, `12345678901234567890.5`}},
	{`{"const": false, "enum": [false, true]}`, []string{`false`}, []string{`true`}},
	{`{"enum": []}`, nil, []string{`1`, `""`}},
	{`{"type": "object", "required": ["a", "a/b"], "properties": {"a": {"type": "string"}, "é": {"const": 1}}}`,
		[]string{`{"a": "x", "a/b": 1}`, `{"a/b": [], "\u0061": "x"}`, `{"a": "x", "a\/b": {}}`},
		[]string{`{"a": "x"}`, `{"a": 1, "a/b": 1}`, `{"a": 1, "a": "x", "a/b": 1}`, `{"a": "x", "a": 1, "a/b": 1}`,
			`{"a": "x", "a/b": 1, "é": 1}`, `{"a": "x", "a/b": 1, "\u00e9": 2}`, `[]`}},
	{`{"additionalProperties": false, "properties": {"a": {}, "é": {}}}`,
		[]string{`{}`, `{"a": 1}`, `{"é": 1}`, `{"\u00e9": 1, "\u0061": 2}`, `[1]`},
		[]string{`{"b": 1}`, `{"a": 1, "b": 2}`, "{\"\xff\": 1}", `{"\ud83d": 1}`}},
	{`{"additionalProperties": {"type": "string", "maxLength": 2}, "properties": {"n": {"type": "integer"}}}`,
		[]string{`{"n": 1, "x": "ab"}`, `{"x": "é", "y": "\ud83d\ude00"}`},
		[]string{`{"n": "x"}`, `{"x": "abc"}`, `{"x": 1}`, `{"n": 1, "n": "x"}`}},
	{`{"minProperties": 2, "maxProperties": 3}`,
		[]string{`{"a": 1, "b": 2}`, `{"a": 1, "b": 2, "c": 3}`},
		[]string{`{"a": 1}`, `{"a": 1, "a": 2}`, `{"a": 1, "\u0061": 2}`, `{"a": 1, "b": 2, "a": 3}`,
			`{"a": 1, "b": 2, "c": 3, "d": 4}`, `{"a": 1, "b": 2, "c": 3, "a": 4}`, "{\"\xff\": 1, \"\xfe\": 2}",
			`{"\u0061": 1, "b": 2}`}},
	{`{"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "array", "items": {"type": "integer"}}}`,
		[]string{`[[]]`, `[[1, 2], [3]]`, `[[1.0]]`},
		[]string{`[]`, `[[], [], []]`, `[[1.5]]`, `[1]`, `[["1"]]`}},
	{`{"items": false}`, []string{`[]`, `{}`, `1`}, []string{`[1]`}},
	{`{"properties": {"a": {"properties": {"b": {"properties": {"c": {"type": "null"}}}}}}}`,
		[]string{`{"a": {"b": {"c": null}}}`, `{"a": {"b": {"d": 1}}}`, `{"a": 1}`},
		[]string{`{"a": {"b": {"c": 0}}}`}},
	{`{"allOf": [{"type": "string"}, {"maxLength": 3}], "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}]}`,
		[]string{`"ab"`, `"bcd"`}, []string{`"cd"`, `"abcd"`, `1`}},
	{`{"$ref": "#/$defs/money", "$defs": {"money": {"type": "object", "required": ["amount"],
		"properties": {"amount": {"$ref": "#/$defs/cents"}}}, "cents": {"type": "integer", "minimum": 0}}}`,
		[]string{`{"amount": 1}`}, []string{`{"amount": -1}`, `{}`, `{"amount": 1.5}`}},
	{`{"$ref": "#/$defs/s", "maxLength": 2, "$defs": {"s": {"type": "string"}}}`, []string{`"ab"`},
		[]string{`"abc"`, `1`}},
	{`{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "t", "description": "d",
		"$comment": "c", "examples": [1], "default": 1, "deprecated": true, "readOnly": true, "writeOnly": false,
		"type": "string", "format": "email"}`, []string{`"not an email"`, `"a@b.c"`}, []string{`1`}},
	{invoice.Schema, []string{string(invoice.Body())}, []string{
		strings.Replace(string(invoice.Body()), `"eur"`, `"eux"`, 1),
		strings.Replace(string(invoice.Body()), `"DE"`, `"de"`, 1),
		strings.Replace(string(invoice.Body()), `"created":1733500000`, `"created":-1`, 1),
		strings.Replace(string(invoice.Body()), `"created":1733500000`, `"created":1.5`, 1),
		strings.Replace(string(invoice.Body()), `"customer":{`, `"customer":{"x":1,`, 1),
		strings.Replace(string(invoice.Body()), `"lines":[`, `"lines":[],"x":[`, 1),
		strings.Replace(string(invoice.Body()), `"region":"eu-central"`, `"region":5`, 1),
		strings.TrimSuffix(string(invoice.Body()), "}"),
		string(invoice.Body()) + "}",
	}},
}

// outsideCases are schemas the fast path leaves to the library.
var outsideCases = []string{
	`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`,
	`{"patternProperties": {"^a": {}}}`,
	`{"prefixItems": [{}]}`,
	`{"uniqueItems": true}`,
	`{"multipleOf": 2}`,
	`{"oneOf": [{}]}`,
	`{"not": {}}`,
	`{"if": {}, "then": {}}`,
	`{"contains": {}}`,
	`{"propertyNames": {"maxLength": 2}}`,
	`{"dependentRequired": {"a": ["b"]}}`,
	`{"unevaluatedProperties": false}`,
	`{"$id": "https://example.com/a.json"}`,
	`{"x-unknown": 1}`,
	`{"enum": [[1], "a"]}`,
	`{"const": 1e2000000}`,
	`{"const": {}}`,
	`{"properties": {"a": {"$schema": "https://json-schema.org/draft/2020-12/schema"}}}`,
	`{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}`,
	`{"$defs": {"n": {"properties": {"c": {"items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"}`,
	`{"$ref": "#", "type": "object"}`,
	`{"$ref": "#/$defs/a~1b", "$defs": {"a/b": {}}}`,
	`{"properties": {"a": {"not": {}}}}`,
	orderSchemaWithRef,
}

// orderSchemaWithRef has a $ref to a definition outside the subset.
const orderSchemaWithRef = `{"properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"multipleOf": 2}}}`

// libraryValid is the library's verdict on body, called directly on the decoded body. A panic counts as
// invalid: the fast path must leave such a body to the library too.
func libraryValid(s *Schema, body []byte) (valid bool) {
	defer func() {
		if recover() != nil {
			valid = false
		}
	}()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	return err == nil && s.s.Validate(v) == nil
}

func compileForTest(t testing.TB, text string) *Schema {
	t.Helper()
	s, err := CompileSchema([]byte(text))
	if err != nil {
		t.Fatalf("CompileSchema(%s): %v", text, err)
	}
	return s
}

// checkSound fails when the fast path vouches for a body the library rejects.
func checkSound(t testing.TB, s *Schema, schema string, body []byte) {
	t.Helper()
	if s.fast != nil && s.fast.accepts(body) && !libraryValid(s, body) {
		t.Errorf("schema %s: the fast path accepts %q, which the library rejects", schema, body)
	}
}

func allBodies() []string {
	var bodies []string
	for _, c := range fastCases {
		bodies = append(bodies, c.fast...)
		bodies = append(bodies, c.others...)
	}
	return append(bodies, deep(maxDepth-1), deep(maxDepth), deep(maxDepth+1), deep(20000), "")
}

// deep is an array nested n times.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestFastPathSound(t *testing.T) {
	bodies := allBodies()
	for _, c := range fastCases {
		s := compileForTest(t, c.schema)
		if s.fast == nil {
			t.Errorf("schema %s: no fast path", c.schema)
			continue
		}
		for _, body := range bodies {
			checkSound(t, s, c.schema, []byte(body))
		}
	}
}

func TestFastPathVouches(t *testing.T) {
	for _, c := range fastCases {
		s := compileForTest(t, c.schema)
		if s.fast == nil {
			t.Errorf("schema %s: no fast path", c.schema)
			continue
		}
		for _, body := range c.fast {
			if !libraryValid(s, []byte(body)) {
				t.Errorf("schema %s: the library rejects %q, a case of the fast path", c.schema, body)
			}
			b := NewBody([]byte(body))
			if err := s.ValidateBody(b); err != nil {
				t.Errorf("schema %s: ValidateBody(%q) = %v", c.schema, body, err)
			}
			if b.decoded {
				t.Errorf("schema %s: ValidateBody(%q) decoded the body", c.schema, body)
			}
		}
	}
}

func TestFastPathOutside(t *testing.T) {
	for _, schema := range outsideCases {
		if s, err := CompileSchema([]byte(schema)); err == nil && s.fast != nil {
			t.Errorf("schema %s: got a fast path", schema)
		}
	}
}

// Validate answers as the library alone does, whichever path decides.
func TestFastPathErrorsUnchanged(t *testing.T) {
	bodies := allBodies()
	for _, c := range fastCases {
		s := compileForTest(t, c.schema)
		for _, body := range bodies {
			got, gotPanic := recovered(func() error { return s.Validate([]byte(body)) })
			want, wantPanic := recovered(func() error { return s.validateDecoded(NewBody([]byte(body))) })
			if !sameError(got, want) || gotPanic != wantPanic {
				t.Errorf("schema %s, body %.40q: Validate = %v (panic %v), want %v (panic %v)", c.schema, body,
					got, gotPanic, want, wantPanic)
			}
		}
	}
}

// sameError compares errors of Validate.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && a.Error() == b.Error()
}

// recovered calls f, reporting whether it panicked: the library does on some numbers with bounds.
func recovered(f func() error) (err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return f(), false
}

func TestFastPathDeepBodies(t *testing.T) {
	s := compileForTest(t, `{"type": "array"}`)
	if b := []byte(deep(maxDepth)); !s.fast.accepts(b) {
		t.Errorf("nesting at the limit refused")
	}
	// Deeper, the library decides: it reads up to 10000 levels.
	if err := s.Validate([]byte(deep(maxDepth + 1))); err != nil {
		t.Errorf("nesting past the limit: %v", err)
	}
	if err := s.Validate([]byte(deep(20000))); err == nil {
		t.Errorf("nesting past the decoder's limit accepted")
	}
}

func FuzzFastPath(f *testing.F) {
	for _, c := range fastCases {
		for _, body := range append(c.fast, c.others...) {
			f.Add(c.schema, []byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, schema string, body []byte) {
		s, err := CompileSchema([]byte(schema))
		if err != nil || s.fast == nil {
			return
		}
		checkSound(t, s, schema, body)
	})
}

func TestAppendUnquoted(t *testing.T) {
	for _, q := range []string{`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\ud83d\ude00"`, `"\ud83d\u0041"`, "\"\xff\xfe\xed\xa0\x80é\"",
		`"\u0000"`, `"\uFFFD"`} {
		checkUnquoted(t, []byte(q))
	}
}

// checkUnquoted compares the scanner's reading of the string q with encoding/json's.
func checkUnquoted(t *testing.T, q []byte) {
	t.Helper()
	if len(q) == 0 || q[0] != '"' {
		return // not a string, or one with space around it
	}
	var want string
	err := json.Unmarshal(q, &want)
	s := scanner{data: q}
	content, plain, ok := s.str()
	if ok && s.pos != len(q) {
		return // q is more than a string
	}
	if ok != (err == nil) {
		t.Fatalf("%q: scanned %v, encoding/json: %v", q, ok, err)
	}
	if ok && string(s.text(content, plain)) != want {
		t.Errorf("%q: got %q, want %q", q, s.text(content, plain), want)
	}
}

// special must find any byte that ends or escapes a string, is a control character or is outside ASCII,
// wherever it is among the 8 and whatever surrounds it.
func TestSpecial(t *testing.T) {
	for c := range 256 {
		want := c < 0x20 || c == '"' || c == '\\' || c >= 0x80
		for _, filler := range []byte{' ', '!', '#', '[', ']', 'a', 0x7f} {
			for i := range 8 {
				b := bytes.Repeat([]byte{filler}, 8)
				b[i] = byte(c)
				if got := special(binary.LittleEndian.Uint64(b)); want && !got {
					t.Fatalf("special(%q) = false", b)
				}
			}
			if special(binary.LittleEndian.Uint64(bytes.Repeat([]byte{filler}, 8))) {
				t.Errorf("special(%q) = true", bytes.Repeat([]byte{filler}, 8))
			}
		}
	}
}

func FuzzUnquote(f *testing.F) {
	f.Add([]byte(`"a\u00e9\ud83d\ude00"`))
	f.Add([]byte("\"\xff\\ud800\""))
	f.Fuzz(func(t *testing.T, q []byte) { checkUnquoted(t, q) })
}

func TestTypeOfScanned(t *testing.T) {
	for _, c := range []struct{ path, body, want string }{
		{"type", `{"type": "a", "type": "b"}`, "b"},
		{"data.type", `{"data": {"type": "a"}, "data": 5}`, ""},
		{"data.type", `{"data": 5, "data": {"type": "a"}}`, "a"},
		{"data.type", `{"data": {"type": "a"}, "data": {"kind": "b"}}`, ""},
		{"data.type", `{"data": {"type": "a", "type": null}}`, ""},
		{"type", `{"t\u0079pe": "\u006frder.paid"}`, "order.paid"},
		{"type", `{"type": "caf\u00e9 \ud83d\ude00"}`, "café 😀"},
		{"type", `{"type": "\ud83d"}`, "\ufffd"},
		{"type", "{\"type\": \"\xff\"}", "\ufffd"},
		{"type", `{"type": "a\"b\\c\/d\ne"}`, "a\"b\\c/d\ne"},
		{"type", `{"type": -1.50e+3}`, "-1.50e+3"},
		{"type", `{"type": 12345678901234567890123}`, "12345678901234567890123"},
		{"type", `{"type": true}`, ""},
		{"type", `{"type": ["a"]}`, ""},
		{"0", `["a", "b"]`, "a"},
		{"1", `["a", "b"]`, "b"},
		{"2", `["a", "b"]`, ""},
		{"01", `["a", "b"]`, ""},
		{"-1", `["a", "b"]`, ""},
		{"+1", `["a", "b"]`, ""},
		{"a.1.b", `{"a": [{"b": "x"}, {"b": "y", "c": [1, {"d": 2}]}]}`, "y"},
		{"type", `{"type": "a"} x`, ""},
		{"type", `{"type": "a",}`, ""},
		{"type", `{"type": "a", "x": [1 2]}`, ""},
		{"type", `{"type": "a", "x": "\q"}`, ""},
		{"type", `{"type": "a", "x": 01}`, ""},
		{"type", "{\"type\": \"a\", \"x\": \"\x01\"}", ""},
		{"type", `{"type": "a"}   `, "a"},
		{"type", `{"type": "a", "x": ` + deep(maxDepth+1) + `}`, "a"}, // past the scanner, decoded
		{"type", `{"type": "a", "x": ` + deep(20000) + `}`, ""},
		{"type", ``, ""},
	} {
		got := Source{JSONPath: c.path}.TypeOf(nil, []byte(c.body))
		if got != c.want {
			t.Errorf("TypeOf(%s, %.60s) = %q, want %q", c.path, c.body, got, c.want)
		}
		if decoded := typeOfDecoded(c.path, []byte(c.body)); got != decoded {
			t.Errorf("TypeOf(%s, %.60s) = %q, decoded %q", c.path, c.body, got, decoded)
		}
	}
}

// typeOfDecoded is TypeOf read from the decoded body.
func typeOfDecoded(path string, raw []byte) string {
	b := NewBody(raw)
	b.value()
	return Source{JSONPath: path}.TypeOfBody(nil, b)
}

func FuzzTypeOf(f *testing.F) {
	f.Add("type", []byte(`{"type": "a", "type": "\u0062"}`))
	f.Add("a.0.b", []byte(`{"a": [{"b": 1.5e3}], "c": null}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		got := Source{JSONPath: path}.TypeOf(nil, body)
		if want := typeOfDecoded(path, body); got != want {
			t.Errorf("TypeOf(%q, %q) = %q, decoded %q", path, body, got, want)
		}
	})
}

// BenchmarkTypeAndValidateInvoice is what intake does per request: read the type, then validate.
func BenchmarkTypeAndValidateInvoice(b *testing.B) {
	s := compileForTest(b, invoice.Schema)
	src := Source{JSONPath: "type"}
	raw := invoice.Body()
	body := NewBody(raw)
	if got := src.TypeOfBody(nil, body); got != invoice.Type {
		b.Fatalf("TypeOfBody = %q", got)
	}
	if err := s.ValidateBody(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		body := NewBody(raw)
		src.TypeOfBody(nil, body)
		if err := s.ValidateBody(body); err != nil {
			b.Fatal(err)
		}
	}
}
