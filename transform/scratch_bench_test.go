package transform

import (
	"strings"
	"testing"

	"github.com/dop251/goja"
)

func benchSetup(b *testing.B, src string) {
	prg := goja.MustCompile("x.js", src, true)
	for b.Loop() {
		vm := goja.New()
		fnv, err := vm.RunProgram(prg)
		if err != nil {
			b.Fatal(err)
		}
		fn, _ := goja.AssertFunction(fnv)
		host := vm.NewObject()
		host.Set("over", func(goja.FunctionCall) goja.Value { return nil })
		host.Set("isProxy", func(goja.FunctionCall) goja.Value { return vm.ToValue(false) })
		host.Set("className", func(goja.FunctionCall) goja.Value { return vm.ToValue("") })
		host.Set("maxBytes", 1<<25)
		host.Set("maxChars", 1<<24)
		host.Set("maxElems", 1<<21)
		if _, err := fn(goja.Undefined(), vm.GlobalObject(), host); err != nil {
			b.Fatal(err)
		}
	}
}

// cut removes the source between two markers.
func cut(src, from, to string) string {
	i := strings.Index(src, from)
	j := strings.Index(src, to)
	if i < 0 || j < 0 {
		panic(from)
	}
	return src[:i] + src[j:]
}

func BenchmarkScratchFull(b *testing.B) { benchSetup(b, guardSource) }
func BenchmarkScratchNoTyped(b *testing.B) {
	benchSetup(b, cut(guardSource, "['ArrayBuffer', 'SharedArrayBuffer']", "// Calls with a list"))
}
func BenchmarkScratchNoArrayMethods(b *testing.B) {
	benchSetup(b, cut(guardSource, "// Array methods that only read", "// joining holds"))
}
func BenchmarkScratchNoArrayCtor(b *testing.B) {
	benchSetup(b, cut(guardSource, "var ArrayG = guardConstructor", "function toIndexChecked"))
}
func BenchmarkScratchNoLike(b *testing.B) {
	benchSetup(b, strings.Replace(guardSource, "function like(fn, orig) {", "function like(fn, orig) { return fn;", 1))
}
func BenchmarkScratchTrivial(b *testing.B) {
	benchSetup(b, "(function (g, host) { return {stringify: JSON.stringify, parse: JSON.parse}; })")
}
func BenchmarkScratchPrologue(b *testing.B) {
	i := strings.Index(guardSource, "function noop()")
	benchSetup(b, guardSource[:i]+"return {}; })")
}
func BenchmarkScratchUntilArrays(b *testing.B) {
	i := strings.Index(guardSource, "// Array methods that change")
	benchSetup(b, guardSource[:i]+"return {}; })")
}
func BenchmarkScratchNoDelete(b *testing.B) {
	benchSetup(b, cut(guardSource, "// No code from strings", "var console = {};"))
}
