// Package eventtype is the domain-free core of event types: their names (CheckName), which names a
// recipient subscribes to (Matches), where a request's type is read from (Source), and the JSON Schema a
// request's body must satisfy (CompileSchema, Schema.Validate). A schema within a common subset is also
// compiled to a check of the body's raw text, which answers for valid bodies without decoding them; the
// library decides everything else.
package eventtype

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// MaxSchemaBytes bounds a schema's JSON text: schemas are stored per event type and compiled on every
// process that relays it, so a large one costs everywhere.
const MaxSchemaBytes = 64 << 10

// schemaURL is where the compiler files the schema. Any other URL a schema refers to is refused, so this
// one must be absolute (a relative one would be resolved against the working directory) and never served.
const (
	schemaBase = "https://schema.adal.invalid/"
	schemaURL  = schemaBase + "event.json"
)

// printer renders the library's messages as it writes them, but for the bounds it names by keyword
// ("minimum: got …, want …"): senders may not know the keywords, so those read like its other messages
// ("got …, want at least …").
var printer = func() *message.Printer {
	b := catalog.NewBuilder()
	for key, msg := range map[string]string{
		"minimum: got %v, want %v":          "got %[1]v, want at least %[2]v",
		"maximum: got %v, want %v":          "got %[1]v, want at most %[2]v",
		"exclusiveMinimum: got %v, want %v": "got %[1]v, want more than %[2]v",
		"exclusiveMaximum: got %v, want %v": "got %[1]v, want less than %[2]v",
		"multipleOf: got %v, want %v":       "got %[1]v, want a multiple of %[2]v",
		"minLength: got %d, want %d":        "too short: got length %[1]d, want at least %[2]d",
		"maxLength: got %d, want %d":        "too long: got length %[1]d, want at most %[2]d",
		"minItems: got %d, want %d":         "too few items: got %[1]d, want at least %[2]d",
		"maxItems: got %d, want %d":         "too many items: got %[1]d, want at most %[2]d",
		"minProperties: got %d, want %d":    "too few properties: got %[1]d, want at least %[2]d",
		"maxProperties: got %d, want %d":    "too many properties: got %[1]d, want at most %[2]d",
	} {
		if err := b.SetString(language.English, key, msg); err != nil {
			panic(err)
		}
	}
	return message.NewPrinter(language.English, message.Catalog(b))
}()

// Schema is a compiled JSON Schema, safe for concurrent use.
type Schema struct {
	s    *jsonschema.Schema
	fast *node // nil when the schema is outside the subset compileFast knows
}

// CompileSchema compiles text as a JSON Schema, draft 2020-12 unless its $schema names another. A schema
// reads nothing but itself: a $ref (or $schema) to any other URL or to a file is refused, since compiling
// runs on behalf of tenants and must not reach the network or the disk. The standard meta-schemas are
// built into the library and so stay available.
func CompileSchema(text []byte) (*Schema, error) {
	if len(text) > MaxSchemaBytes {
		return nil, fmt.Errorf("schema is larger than %d KiB", MaxSchemaBytes>>10)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %s", jsonMessage(err))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", compileMessage(err))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", compileMessage(err))
	}
	if expansion(s) > MaxSubschemas {
		return nil, fmt.Errorf("schema is too complex: with its references followed, it has more than %d "+
			"subschemas", MaxSubschemas)
	}
	// The library finds a $ref that loops back to itself only while validating, where it would fail
	// every body; a probe catches the loops that any value reaches.
	var verr *jsonschema.ValidationError
	if errors.As(s.Validate(nil), &verr) {
		if cycle := findKind[*kind.RefCycle](verr); cycle != nil {
			return nil, fmt.Errorf("schema does not compile: %s", local(cycle.LocalizedString(printer)))
		}
	}
	return &Schema{s: s, fast: compileFast(doc, s)}, nil
}

// refuseLoader is the compiler's only way to fetch a document, and it fetches none: the schema itself is
// added as a resource beforehand.
type refuseLoader struct{}

var errRemote = errors.New("only references within the schema itself are allowed")

func (refuseLoader) Load(string) (any, error) { return nil, errRemote }

// compileMessage turns a compiler error into a short message that names no internal URL.
func compileMessage(err error) string {
	var invalid *jsonschema.SchemaValidationError
	if errors.As(err, &invalid) {
		var verr *jsonschema.ValidationError
		if errors.As(invalid.Err, &verr) {
			return firstError(verr).Error()
		}
		err = invalid.Err
	}
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		return fmt.Sprintf("it refers to %q: %v", strings.TrimPrefix(load.URL, schemaBase), load.Err)
	}
	var noPtr *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &noPtr) {
		return fmt.Sprintf("%q points to nothing in the schema", local(noPtr.URL))
	}
	var noAnchor *jsonschema.AnchorNotFoundError
	if errors.As(err, &noAnchor) {
		return fmt.Sprintf("%q points to no anchor in the schema", local(noAnchor.Reference))
	}
	return local(err.Error())
}

// local is a message or a reference as the schema's author would write it, without the URL the compiler
// filed the schema at.
func local(s string) string {
	if !strings.Contains(s, schemaBase) {
		return s
	}
	s = strings.ReplaceAll(s, `"`+schemaURL+`"`, "the schema")
	s = strings.ReplaceAll(s, schemaURL, "")
	return strings.ReplaceAll(s, schemaBase, "")
}

// findKind is the first error of kind K in an error tree, or nil.
func findKind[K jsonschema.ErrorKind](e *jsonschema.ValidationError) jsonschema.ErrorKind {
	if k, ok := e.ErrorKind.(K); ok {
		return k
	}
	for _, c := range e.Causes {
		if k := findKind[K](c); k != nil {
			return k
		}
	}
	return nil
}

// ValidationError is why a body does not satisfy a schema: Pointer is the JSON pointer of the offending
// value in the body ("/amount", "/items/0/sku"; "" for the body itself) and Message what is wrong with it.
type ValidationError struct {
	Pointer string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Pointer == "" {
		return e.Message
	}
	return "at " + e.Pointer + ": " + e.Message
}

// Validate checks body against the schema. It returns nil, or a *ValidationError: the body is not JSON,
// or the first of its errors (see firstError), so that senders see one precise reason at a time.
func (s *Schema) Validate(body []byte) error { return s.ValidateBody(NewBody(body)) }

// Body is a request body decoded at most once, for reading its type and validating it alike.
type Body struct {
	raw     []byte
	decoded bool
	v       any
	err     error
	// scanned is 1 once the scanner read raw as well formed, -1 if it could not (raw is malformed, or too
	// deep for it), 0 until then.
	scanned int8
}

// NewBody wraps a body; nothing is decoded until it is needed.
func NewBody(raw []byte) *Body { return &Body{raw: raw} }

func (b *Body) value() (any, error) {
	if !b.decoded {
		// The library's own decoder keeps numbers as written, so that big or precise ones are checked
		// exactly.
		b.v, b.err = jsonschema.UnmarshalJSON(bytes.NewReader(b.raw))
		b.decoded = true
	}
	return b.v, b.err
}

// ValidateBody is Validate of a body that may be decoded already.
func (s *Schema) ValidateBody(body *Body) error {
	if s.fast != nil && body.scanned >= 0 && s.fast.accepts(body.raw) {
		body.scanned = 1
		return nil
	}
	return s.validateDecoded(body)
}

// validateDecoded is ValidateBody by the library alone, which also says why a body is invalid.
func (s *Schema) validateDecoded(body *Body) error {
	v, err := body.value()
	if err != nil {
		return &ValidationError{Message: "body is not JSON: " + jsonMessage(err)}
	}
	if err = s.check(v); err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &ValidationError{Message: err.Error()}
	}
	return firstError(verr)
}

// check is the library's validation of a decoded body. The library panics on some values it cannot read
// as numbers (an exponent beyond what it can represent, compared with a bound): such a body is refused,
// not the request's handler brought down.
func (s *Schema) check(v any) (err error) {
	defer func() {
		if recover() != nil {
			err = &ValidationError{Message: "body has a number that cannot be compared with the schema's bounds"}
		}
	}()
	return s.s.Validate(v)
}

func jsonMessage(err error) string {
	if errors.Is(err, io.EOF) {
		return "it is empty"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends too early"
	}
	return err.Error()
}

// firstError picks one leaf of the library's error tree: the deepest in the instance, as the most specific,
// and among equals the first by instance location (array indexes in numeric order), then by schema
// location. The library walks objects in map order, so without this the reported error would change from
// one request to the next.
func firstError(root *jsonschema.ValidationError) *ValidationError {
	var best *jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.PropertyNames, *kind.ContentSchema:
			// Their causes locate values inside a property name or a decoded string, not in the body.
			if best == nil || before(e, best) {
				best = e
			}
			return
		}
		if len(e.Causes) == 0 {
			if best == nil || before(e, best) {
				best = e
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	if k, ok := best.ErrorKind.(*kind.AdditionalProperties); ok {
		slices.Sort(k.Properties) // listed in map order by the library
	}
	return &ValidationError{
		Pointer: pointer(best.InstanceLocation),
		Message: local(best.ErrorKind.LocalizedString(printer)),
	}
}

// before orders leaves for firstError.
func before(a, b *jsonschema.ValidationError) bool {
	if la, lb := len(a.InstanceLocation), len(b.InstanceLocation); la != lb {
		return la > lb
	}
	for i, ta := range a.InstanceLocation {
		tb := b.InstanceLocation[i]
		if ta == tb {
			continue
		}
		na, errA := strconv.Atoi(ta)
		nb, errB := strconv.Atoi(tb)
		if errA == nil && errB == nil {
			return na < nb
		}
		return ta < tb
	}
	if a.SchemaURL != b.SchemaURL {
		return a.SchemaURL < b.SchemaURL
	}
	if c := slices.Compare(a.ErrorKind.KeywordPath(), b.ErrorKind.KeywordPath()); c != 0 {
		return c < 0
	}
	return a.ErrorKind.LocalizedString(printer) < b.ErrorKind.LocalizedString(printer)
}

// pointer writes instance tokens as a JSON pointer (RFC 6901).
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}
