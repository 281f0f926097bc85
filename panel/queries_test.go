package panel

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// loadSchema reads the server's real schema from the repository: the hand-written *.graphqls and the
// generated ent.graphql.
func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "graph", "*.graphqls"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "graph", "ent.graphql"))
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read schema: %v", err)
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	if len(sources) < 2 {
		t.Fatalf("schema files not found: %v", files)
	}
	schema, gerr := gqlparser.LoadSchema(sources...)
	if gerr != nil {
		t.Fatalf("load schema: %v", gerr)
	}
	return schema
}

var (
	// exportedOp matches `export const NAME = /* GraphQL */ `...`;` in queries.js.
	exportedOp = regexp.MustCompile("(?s)export const ([A-Z0-9_]+) = /\\* GraphQL \\*/ `([^`]*)`")
	// inlineOp catches a GraphQL document written as a template string anywhere else.
	inlineOp = regexp.MustCompile("`\\s*(query|mutation|subscription)\\b[^`]*\\{")
)

// panelOperations returns queries.js's operations by export name.
func panelOperations(t *testing.T) map[string]string {
	t.Helper()
	src, err := fs.ReadFile(AssetsFS(), "queries.js")
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]string{}
	for _, m := range exportedOp.FindAllStringSubmatch(string(src), -1) {
		ops[m[1]] = m[2]
	}
	if got := strings.Count(string(src), "export const "); got != len(ops) {
		t.Fatalf("queries.js has %d exports but only %d match `export const NAME = /* GraphQL */ `…``", got, len(ops))
	}
	if len(ops) == 0 {
		t.Fatal("no operations found in queries.js")
	}
	return ops
}

func TestOperationsAreValidAgainstSchema(t *testing.T) {
	schema := loadSchema(t)
	ops := panelOperations(t)
	names := map[string]string{}
	for export, text := range ops {
		t.Run(export, func(t *testing.T) {
			if strings.Contains(text, "${") {
				t.Fatalf("operation %s interpolates a value; pass variables instead", export)
			}
			doc, err := parser.ParseQuery(&ast.Source{Name: export, Input: text})
			if err != nil {
				t.Fatalf("parse %s: %v", export, err)
			}
			if len(doc.Operations) != 1 {
				t.Fatalf("%s holds %d operations, want exactly 1", export, len(doc.Operations))
			}
			op := doc.Operations[0]
			if op.Name == "" {
				t.Fatalf("%s is anonymous; name it for logs and tracing", export)
			}
			if prev, dup := names[op.Name]; dup {
				t.Fatalf("operation name %s used by both %s and %s", op.Name, prev, export)
			}
			names[op.Name] = export
			if errs := validator.Validate(schema, doc); len(errs) > 0 {
				t.Fatalf("%s is invalid against the schema:\n%v\n%s", export, errs, text)
			}
		})
	}
}

// TestOperationsLiveOnlyInQueriesJS keeps the previous test honest: an operation written inline in another
// module would escape validation.
func TestOperationsLiveOnlyInQueriesJS(t *testing.T) {
	var checked []string
	err := fs.WalkDir(AssetsFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") || p == "queries.js" {
			return err
		}
		src, err := fs.ReadFile(AssetsFS(), p)
		if err != nil {
			return err
		}
		checked = append(checked, p)
		if loc := inlineOp.FindStringIndex(string(src)); loc != nil {
			t.Errorf("%s contains an inline GraphQL operation near %q; move it to queries.js", p,
				string(src)[loc[0]:min(loc[1], loc[0]+60)])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(checked) == 0 {
		t.Fatal("no JavaScript modules besides queries.js")
	}
}

// TestValidationCatchesMistakes keeps TestOperationsAreValidAgainstSchema from passing vacuously: the same
// loader and validator must reject a field, an argument and a variable type the schema does not have.
func TestValidationCatchesMistakes(t *testing.T) {
	schema := loadSchema(t)
	for _, bad := range []string{
		`query A { viewer { role nickname } }`,
		`query B($id: ID!) { request(id: $id, first: 3) { id } }`,
		`query C($id: Int!) { request(id: $id) { id } }`,
		`subscription D { deliveryUpdated(requestId: "1") { id status nope } }`,
	} {
		doc, err := parser.ParseQuery(&ast.Source{Name: "bad", Input: bad})
		if err != nil {
			t.Fatalf("parse %q: %v", bad, err)
		}
		if errs := validator.Validate(schema, doc); len(errs) == 0 {
			t.Errorf("validator accepted %q", bad)
		}
	}
}
