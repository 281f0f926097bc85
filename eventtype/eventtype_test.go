package eventtype_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/adal-relay/adal/eventtype"
)

const orderSchema = `{
	"type": "object",
	"required": ["id", "amount", "customer"],
	"properties": {
		"id": {"type": "string"},
		"amount": {"type": "number", "minimum": 0},
		"customer": {
			"type": "object",
			"required": ["email"],
			"properties": {"email": {"type": "string"}, "address": {"$ref": "#/$defs/address"}}
		},
		"items": {
			"type": "array",
			"items": {
				"type": "object",
				"required": ["sku", "qty"],
				"properties": {"sku": {"type": "string", "pattern": "^SKU-"}, "qty": {"type": "integer", "minimum": 1}}
			}
		}
	},
	"$defs": {
		"address": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
	}
}`

func mustCompile(t testing.TB, text string) *eventtype.Schema {
	t.Helper()
	s, err := eventtype.CompileSchema([]byte(text))
	if err != nil {
		t.Fatalf("CompileSchema: %v", err)
	}
	return s
}

func TestCompileSchemaErrors(t *testing.T) {
	for _, c := range []struct{ name, schema, want string }{
		{"not JSON", `{"type": `, "schema is not JSON: "},
		{"empty", ``, "schema is not JSON: it is empty"},
		{"trailing text", `{} {}`, "schema is not JSON: "},
		{"not a schema", `42`, "schema does not compile: got number, want boolean or object"},
		{"bad type", `{"properties": {"amount": {"type": "numbr"}}}`,
			"schema does not compile: at /properties/amount/type: value must be one of"},
		{"bad minimum", `{"properties": {"amount": {"minimum": "zero"}}}`,
			"schema does not compile: at /properties/amount/minimum: got string, want number"},
		{"bad pattern", `{"pattern": "("}`, "schema does not compile: at /pattern: "},
		{"remote ref", `{"$ref": "https://example.com/order.json"}`,
			`schema does not compile: it refers to "https://example.com/order.json": only references within the schema itself are allowed`},
		{"remote ref in a subschema", `{"properties": {"a": {"$ref": "http://example.com/a.json#/x"}}}`,
			`it refers to "http://example.com/a.json"`},
		{"file ref", `{"$ref": "file:///etc/passwd"}`, `it refers to "file:///etc/passwd"`},
		{"relative ref", `{"$ref": "other.json"}`, `it refers to "other.json"`},
		{"relative ref under an $id", `{"$id": "https://example.com/a.json", "$ref": "b.json"}`,
			`it refers to "https://example.com/b.json"`},
		{"remote meta-schema", `{"$schema": "https://example.com/meta.json"}`,
			`it refers to "https://example.com/meta.json"`},
		{"missing local ref", `{"$ref": "#/$defs/nope"}`, `"#/$defs/nope" points to nothing in the schema`},
		{"missing anchor", `{"$ref": "#nope"}`, `"#nope" points to no anchor in the schema`},
		{"ref loop", `{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}`,
			"causing reference cycle"},
		{"too large", `{"description": "` + strings.Repeat("x", eventtype.MaxSchemaBytes) + `"}`,
			"schema is larger than 64 KiB"},
		{"too complex", explosive(20), "schema is too complex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := eventtype.CompileSchema([]byte(c.schema))
			if err == nil {
				t.Fatalf("compiled, want error %q", c.want)
			}
			if s != nil {
				t.Errorf("got a schema with the error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "adal.invalid") {
				t.Errorf("error %q names the internal URL", err)
			}
		})
	}
}

// explosive is a schema of n definitions, each referring twice to the next.
func explosive(n int) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d": {"allOf": [{"$ref": "#/$defs/d%d"}, {"$ref": "#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d": {"type": "integer"}`, n))
	return `{"$ref": "#/$defs/d0", "$defs": {` + strings.Join(defs, ", ") + `}}`
}

func TestCompileSchemaAccepts(t *testing.T) {
	for _, schema := range []string{
		`true`,
		`{}`,
		orderSchema,
		explosive(8),
		`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}`,
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`,
		`{"$id": "https://example.com/order.json", "$ref": "#/$defs/a", "$defs": {"a": {"type": "object"}}}`,
		`{"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}`,
	} {
		mustCompile(t, schema)
	}
}

func validationError(t *testing.T, err error) *eventtype.ValidationError {
	t.Helper()
	var verr *eventtype.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v (%T), want a *ValidationError", err, err)
	}
	return verr
}

func TestValidate(t *testing.T) {
	s := mustCompile(t, orderSchema)
	for _, c := range []struct{ name, body, pointer, message string }{
		{"valid", `{"id": "o1", "amount": 12.5, "customer": {"email": "a@b.c"}, "items": [{"sku": "SKU-1", "qty": 2}]}`, "", ""},
		{"big number kept exact", `{"id": "o1", "amount": 123456789012345678901234567890.5, "customer": {"email": "a@b.c"}}`, "", ""},
		{"wrong type", `{"id": "o1", "amount": "12", "customer": {"email": "a@b.c"}}`, "/amount", "got string, want number"},
		{"below minimum", `{"id": "o1", "amount": -1, "customer": {"email": "a@b.c"}}`, "/amount", "got -1, want at least 0"},
		{"missing at the root", `{"amount": 1, "customer": {"email": "a@b.c"}}`, "", "missing property 'id'"},
		{"missing in a nested object", `{"id": "o1", "amount": 1, "customer": {}}`, "/customer", "missing property 'email'"},
		{"through a local $ref", `{"id": "o1", "amount": 1, "customer": {"email": "a@b.c", "address": {"city": 5}}}`,
			"/customer/address/city", "got number, want string"},
		{"in an array", `{"id": "o1", "amount": 1, "customer": {"email": "a@b.c"}, "items": [{"sku": "SKU-1", "qty": 1}, {"sku": "X", "qty": 1}]}`,
			"/items/1/sku", "'X' does not match pattern '^SKU-'"},
		{"body of the wrong type", `[1, 2]`, "", "got array, want object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Validate([]byte(c.body))
			if c.message == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			verr := validationError(t, err)
			if verr.Pointer != c.pointer || verr.Message != c.message {
				t.Errorf("got %q %q, want %q %q", verr.Pointer, verr.Message, c.pointer, c.message)
			}
		})
	}
}

func TestValidateErrorText(t *testing.T) {
	s := mustCompile(t, orderSchema)
	err := s.Validate([]byte(`{"id": "o1", "amount": "12", "customer": {"email": "a@b.c"}}`))
	if got, want := err.Error(), "at /amount: got string, want number"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	err = s.Validate([]byte(`{"amount": 1, "customer": {"email": "a@b.c"}}`))
	if got, want := err.Error(), "missing property 'id'"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// The first error is the deepest, then the first in the body, whatever order the library finds them in.
func TestValidateFirstErrorIsStable(t *testing.T) {
	s := mustCompile(t, orderSchema)
	body := `{"amount": "x", "customer": {"address": {"city": 1}}, "items": [{"sku": 1, "qty": 0}, {"sku": 2}],
		"id": 3}`
	for range 50 {
		verr := validationError(t, s.Validate([]byte(body)))
		if verr.Pointer != "/customer/address/city" || verr.Message != "got number, want string" {
			t.Fatalf("got %q %q", verr.Pointer, verr.Message)
		}
	}
	body = `{"id": "o1", "amount": 1, "customer": {"email": "e"}, "items": [` +
		strings.Repeat(`{"sku": "SKU-1", "qty": 1}, `, 10) + `{"sku": 1, "qty": 0}, {"sku": "S", "qty": 1}]}`
	for range 50 {
		verr := validationError(t, s.Validate([]byte(body)))
		if verr.Pointer != "/items/10/qty" || verr.Message != "got 0, want at least 1" {
			t.Fatalf("got %q %q", verr.Pointer, verr.Message)
		}
	}
}

func TestValidatePointerEscapes(t *testing.T) {
	s := mustCompile(t, `{"properties": {"a/b~c": {"type": "string"}}}`)
	verr := validationError(t, s.Validate([]byte(`{"a/b~c": 1}`)))
	if verr.Pointer != "/a~1b~0c" {
		t.Errorf("pointer %q, want /a~1b~0c", verr.Pointer)
	}
}

func TestValidateBodyNotJSON(t *testing.T) {
	s := mustCompile(t, `{"type": "object"}`)
	for _, body := range []string{``, `{"a": `, `not json`, `{} {}`} {
		verr := validationError(t, s.Validate([]byte(body)))
		if verr.Pointer != "" || !strings.HasPrefix(verr.Message, "body is not JSON: ") {
			t.Errorf("body %q: got %q %q", body, verr.Pointer, verr.Message)
		}
	}
}

func TestValidate2020Features(t *testing.T) {
	s := mustCompile(t, `{
		"type": "array",
		"prefixItems": [{"type": "string"}, {"$ref": "#/$defs/positive"}],
		"items": false,
		"$defs": {"positive": {"type": "integer", "exclusiveMinimum": 0}}
	}`)
	if err := s.Validate([]byte(`["a", 1]`)); err != nil {
		t.Errorf("valid tuple: %v", err)
	}
	verr := validationError(t, s.Validate([]byte(`["a", 0]`)))
	if verr.Pointer != "/1" || verr.Message != "got 0, want more than 0" {
		t.Errorf("got %q %q", verr.Pointer, verr.Message)
	}
	verr = validationError(t, s.Validate([]byte(`[1, 1]`)))
	if verr.Pointer != "/0" || verr.Message != "got number, want string" {
		t.Errorf("got %q %q", verr.Pointer, verr.Message)
	}
	// items: false refuses anything past the prefix.
	if err := s.Validate([]byte(`["a", 1, 2]`)); err == nil {
		t.Errorf("extra item accepted")
	}

	// Without $schema, the draft is 2020-12: unevaluatedProperties and dependentRequired apply.
	s = mustCompile(t, `{
		"allOf": [{"properties": {"a": {}}}],
		"unevaluatedProperties": false,
		"dependentRequired": {"a": ["b"]},
		"properties": {"b": {}}
	}`)
	if err := s.Validate([]byte(`{"a": 1, "b": 2}`)); err != nil {
		t.Errorf("valid: %v", err)
	}
	verr = validationError(t, s.Validate([]byte(`{"a": 1}`)))
	if !strings.Contains(verr.Message, "'b'") {
		t.Errorf("dependentRequired: got %q", verr.Message)
	}
	if err := s.Validate([]byte(`{"b": 1, "c": 2}`)); err == nil {
		t.Errorf("unevaluated property accepted")
	}
}

func TestValidateConcurrent(t *testing.T) {
	s := mustCompile(t, orderSchema)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				body := fmt.Sprintf(`{"id": "o%d", "amount": "x", "customer": {"email": "e"}}`, i)
				if err := s.Validate([]byte(body)); err == nil || err.Error() != "at /amount: got string, want number" {
					t.Errorf("got %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSourceValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		src  eventtype.Source
		want string // "" when valid
	}{
		{"header", eventtype.Source{Header: "X-Event-Type"}, ""},
		{"github header", eventtype.Source{Header: "x-github-event"}, ""},
		{"path", eventtype.Source{JSONPath: "type"}, ""},
		{"nested path", eventtype.Source{JSONPath: "data.object.type"}, ""},
		{"rooted path", eventtype.Source{JSONPath: "$.data.type"}, ""},
		{"array index", eventtype.Source{JSONPath: "items.0.kind"}, ""},
		{"special keys", eventtype.Source{JSONPath: "@type"}, ""},
		{"neither", eventtype.Source{}, "set a header or a JSON path"},
		{"both", eventtype.Source{Header: "X-Type", JSONPath: "type"}, "not both"},
		{"header with a space", eventtype.Source{Header: "X Type"}, `header name "X Type" has ' '`},
		{"header with a colon", eventtype.Source{Header: "X-Type:"}, "header name"},
		{"header not ASCII", eventtype.Source{Header: "X-Typé"}, "header name"},
		{"header too long", eventtype.Source{Header: strings.Repeat("x", 256)}, "longer than 255"},
		{"root only", eventtype.Source{JSONPath: "$"}, "names no field"},
		{"root dot", eventtype.Source{JSONPath: "$."}, "names no field"},
		{"empty segment", eventtype.Source{JSONPath: "data..type"}, "empty field"},
		{"trailing dot", eventtype.Source{JSONPath: "data."}, "empty field"},
		{"brackets", eventtype.Source{JSONPath: "items[0].kind"}, `has '['`},
		{"space", eventtype.Source{JSONPath: "event type"}, `has ' '`},
		{"too deep", eventtype.Source{JSONPath: strings.Repeat("a.", 16) + "a"}, "deeper than 16"},
		{"too long", eventtype.Source{JSONPath: strings.Repeat("a", 256)}, "longer than 255"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.src.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case c.want != "" && err == nil:
				t.Errorf("valid, want error %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestSourceTypeOf(t *testing.T) {
	h := http.Header{}
	h.Add("X-Event-Type", "  order.paid ")
	h.Add("X-Event-Type", "order.failed")
	h.Set("X-Long", strings.Repeat("a", 256))
	h.Set("X-Max", strings.Repeat("a", 255))
	body := `{"type": " invoice.created ", "data": {"object": {"type": "charge", "code": 42, "rate": 1.50,
		"ok": true, "none": null, "obj": {}, "long": "` + strings.Repeat("b", 256) + `"}},
		"items": [{"kind": "first"}, {"kind": "second"}], "$type": "dotnet"}`
	for _, c := range []struct {
		name string
		src  eventtype.Source
		body string
		want string
	}{
		{"header, first value trimmed", eventtype.Source{Header: "x-event-type"}, body, "order.paid"},
		{"header absent", eventtype.Source{Header: "X-Other"}, body, ""},
		{"header too long", eventtype.Source{Header: "X-Long"}, body, ""},
		{"header at the limit", eventtype.Source{Header: "X-Max"}, body, strings.Repeat("a", 255)},
		{"path, trimmed", eventtype.Source{JSONPath: "type"}, body, "invoice.created"},
		{"rooted path", eventtype.Source{JSONPath: "$.type"}, body, "invoice.created"},
		{"nested path", eventtype.Source{JSONPath: "data.object.type"}, body, "charge"},
		{"array index", eventtype.Source{JSONPath: "items.1.kind"}, body, "second"},
		{"array index out of range", eventtype.Source{JSONPath: "items.2.kind"}, body, ""},
		{"array index not canonical", eventtype.Source{JSONPath: "items.01.kind"}, body, ""},
		{"number as written", eventtype.Source{JSONPath: "data.object.code"}, body, "42"},
		{"decimal as written", eventtype.Source{JSONPath: "data.object.rate"}, body, "1.50"},
		{"boolean", eventtype.Source{JSONPath: "data.object.ok"}, body, ""},
		{"null", eventtype.Source{JSONPath: "data.object.none"}, body, ""},
		{"object", eventtype.Source{JSONPath: "data.object.obj"}, body, ""},
		{"missing", eventtype.Source{JSONPath: "data.nope.type"}, body, ""},
		{"through a scalar", eventtype.Source{JSONPath: "type.x"}, body, ""},
		{"too long", eventtype.Source{JSONPath: "data.object.long"}, body, ""},
		{"dollar key", eventtype.Source{JSONPath: "$type"}, body, "dotnet"},
		{"not JSON", eventtype.Source{JSONPath: "type"}, `{"type": "order.paid"`, ""},
		{"empty body", eventtype.Source{JSONPath: "type"}, ``, ""},
		{"body is an array", eventtype.Source{JSONPath: "0.kind"}, `[{"kind": "k"}]`, "k"},
		{"invalid path", eventtype.Source{JSONPath: "a..b"}, body, ""},
		{"no source", eventtype.Source{}, body, ""},
		{"both set", eventtype.Source{Header: "X-Event-Type", JSONPath: "type"}, body, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.src.TypeOf(h, []byte(c.body)); got != c.want {
				t.Errorf("TypeOf = %q, want %q", got, c.want)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, name := range []string{"order.paid", "invoice:created", "stripe/charge.succeeded", "A_b-9",
		strings.Repeat("x", 255)} {
		if err := eventtype.CheckName(name); err != nil {
			t.Errorf("CheckName(%q): %v", name, err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"", "event type name is empty"},
		{strings.Repeat("x", 256), "longer than 255"},
		{"order paid", `event type name "order paid" has ' '`},
		{"order.*", `has '*'`},
		{"café", `has 'é'`},
		{"tab\t", `has '\t'`},
	} {
		err := eventtype.CheckName(c.name)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckName(%q) = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, p := range []string{"*", "order.paid", "order.*", "invoice:*", "stripe/*", "stripe/charge.*"} {
		if err := eventtype.CheckPattern(p); err != nil {
			t.Errorf("CheckPattern(%q): %v", p, err)
		}
	}
	for _, c := range []struct{ p, want string }{
		{"", "empty"},
		{"order*", "puts * inside a name"},
		{"*.paid", "has '*'"},
		{"order.**", "puts * inside a name"},
		{"or der.*", "has ' '"},
	} {
		err := eventtype.CheckPattern(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckPattern(%q) = %v, want it to contain %q", c.p, err, c.want)
		}
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		types []string
		t     string
		want  bool
	}{
		{nil, "order.paid", true},
		{nil, "", true},
		{[]string{}, "anything", true},
		{[]string{"order.paid"}, "order.paid", true},
		{[]string{"order.paid"}, "order.failed", false},
		{[]string{"order.paid"}, "Order.paid", false},
		{[]string{"order.paid"}, "", false},
		{[]string{"invoice.sent", "order.paid"}, "order.paid", true},
		{[]string{"order.*"}, "order.paid", true},
		{[]string{"order.*"}, "order.paid.late", true},
		{[]string{"order.*"}, "order", false},
		{[]string{"order.*"}, "order.", false},
		{[]string{"order.*"}, "orders.paid", false},
		{[]string{"invoice:*"}, "invoice:created", true},
		{[]string{"stripe/*"}, "stripe/charge.succeeded", true},
		{[]string{"*"}, "anything", true},
		{[]string{"*"}, "", false},
		{[]string{"order*"}, "orders", false},
		{[]string{"order*"}, "order*", true}, // compared as written; no name holds '*'
	} {
		if got := eventtype.Matches(c.types, c.t); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.types, c.t, got, c.want)
		}
	}
}

// benchBody is an order of about a KiB, valid against orderSchema.
func benchBody() []byte {
	var items []string
	for i := range 22 {
		items = append(items, fmt.Sprintf(`{"sku": "SKU-%04d", "qty": %d}`, i, i+1))
	}
	return []byte(`{"id": "ord_1NXWPnCo6bFb1KQto6Bm1PAY", "amount": 12345.67, "currency": "eur",
		"customer": {"email": "jane.doe@example.com", "name": "Jane Doe",
			"address": {"line1": "1 Rue de la Paix", "city": "Paris", "postal_code": "75002", "country": "FR"}},
		"metadata": {"source": "checkout", "campaign": "spring", "note": "leave at the door"},
		"items": [` + strings.Join(items, ", ") + `]}`)
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, orderSchema)
	body := benchBody()
	if err := s.Validate(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTypeOf(b *testing.B) {
	body := benchBody()
	src := eventtype.Source{JSONPath: "customer.address.city"}
	if got := src.TypeOf(nil, body); got != "Paris" {
		b.Fatalf("TypeOf = %q", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		src.TypeOf(nil, body)
	}
}

func TestValidateBoundMessages(t *testing.T) {
	s := mustCompile(t, `{"properties": {
		"a": {"maximum": 10}, "b": {"exclusiveMaximum": 10}, "c": {"multipleOf": 0.5},
		"d": {"minLength": 2}, "e": {"maxLength": 1}, "f": {"minItems": 1}, "g": {"maxItems": 1},
		"h": {"minProperties": 1}, "i": {"maxProperties": 0}, "j": {"exclusiveMinimum": 1.5}
	}}`)
	for _, c := range []struct{ body, want string }{
		{`{"a": 11}`, "at /a: got 11, want at most 10"},
		{`{"b": 10}`, "at /b: got 10, want less than 10"},
		{`{"c": 0.7}`, "at /c: got 0.7, want a multiple of 0.5"},
		{`{"d": "x"}`, "at /d: too short: got length 1, want at least 2"},
		{`{"e": "xy"}`, "at /e: too long: got length 2, want at most 1"},
		{`{"f": []}`, "at /f: too few items: got 0, want at least 1"},
		{`{"g": [1, 2]}`, "at /g: too many items: got 2, want at most 1"},
		{`{"h": {}}`, "at /h: too few properties: got 0, want at least 1"},
		{`{"i": {"x": 1}}`, "at /i: too many properties: got 1, want at most 0"},
		{`{"j": 1.5}`, "at /j: got 1.5, want more than 1.5"},
	} {
		if err := s.Validate([]byte(c.body)); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%s) = %v, want %q", c.body, err, c.want)
		}
	}
}

func TestValidateRefusesNumbersBeyondComparison(t *testing.T) {
	s := mustCompile(t, `{"properties": {"n": {"minimum": 0}}}`)
	err := s.Validate([]byte(`{"n": 1e2000000}`))
	var verr *eventtype.ValidationError
	if !errors.As(err, &verr) || !strings.Contains(verr.Message, "number") {
		t.Errorf("Validate = %v, want the body refused for its number", err)
	}
}

func TestAdditionalPropertiesAreListedInOrder(t *testing.T) {
	s := mustCompile(t, `{"properties": {"a": {}}, "additionalProperties": false}`)
	for range 20 {
		err := s.Validate([]byte(`{"a": 1, "z": 1, "m": 1, "b": 1, "y": 1}`))
		if want := `additional properties 'b', 'm', 'y', 'z' not allowed`; err == nil || err.Error() != want {
			t.Fatalf("Validate = %v, want %q", err, want)
		}
	}
}
