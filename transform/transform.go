// Package transform runs a tenant's JavaScript transformation on a request
// before it is delivered.
//
// # The contract
//
// The source defines a function transform(request). The request is an object
// with these fields:
//
//   - method: the HTTP method, a string.
//   - path: the request's path after /in/{key}, starting with "/".
//   - query: the raw query string, without "?".
//   - headers: an object of lower-case header name to string; repeated values
//     are joined with ", ".
//   - body: the parsed JSON value when the body is valid JSON (whatever the
//     content type says), else the body as a string (invalid UTF-8 replaced).
//
// transform returns the request changed: the same object or a new one with
// those fields. A field that is missing or undefined keeps its input value.
// Returning null cancels the delivery (it is cancelled, not failed).
// Returning nothing (undefined) is an error, as is returning anything that is
// not an object.
//
// The returned fields are checked: method, path and query must be strings
// (path starts with "/"; a leading "?" on query is dropped). Returned headers
// replace the input headers: names are canonicalized and each value must be a
// string, or an array of strings for a repeated header. A body that is a
// string is sent as is; any other value is serialized as JSON, and then
// Content-Type is set to application/json unless the returned headers have
// one. A JSON body that the function looked into is serialized again, so its
// formatting may change and numbers are JavaScript numbers; one that it only
// passed on, returned as it is or placed inside another value, keeps its
// bytes. Delete request.body to send the input bytes whatever happened.
//
// # The sandbox
//
// Runs of different programs never share a runtime, so nothing a run leaves
// behind is seen by another recipient's transform or another tenant's (see
// Runtimes for runs of the same program). The runtime has the language's
// built-ins (Math.random and Date included) and a console whose methods do
// nothing; it has no require, no network, no file access and no timers, and
// eval and the Function constructor are removed.
//
// # Limits
//
// Limits.CPU bounds the time a run takes, measured on the wall clock (goja
// cannot count the CPU a run uses), from when the run gets one of the
// process's CPUs: no more runs go at once than the process has CPUs, so a run
// waits for its turn rather than spend its time sharing one (a busy machine
// still leaves it less). The runtime is interrupted when it has run that
// long, or when the context is done, and the run fails with TIMEOUT.
//
// Limits.Memory bounds what a run allocates. The Go runtime only counts the
// allocations of the whole process, so a watchdog samples that count while
// the run lasts and interrupts the run (MEMORY) once the process has
// allocated more than the limit since the run started. Allocations made at
// the same time by other goroutines count against the run too: the bound is
// conservative, and under heavy concurrent allocation a run may be stopped
// early, never late. Built-in functions that could allocate a huge amount in
// a single call (String.prototype.repeat, padStart, Array and typed array
// constructors, join, JSON.stringify, replace with a string replacement and
// others) are wrapped to refuse results over the limit or to run in steps that
// the watchdog can stop, and the body returned, with the request's body in it
// as many times as it is, is held to the limit too. The call stack depth is bounded as well; endless
// recursion fails with MEMORY.
//
// A built-in function cannot be interrupted while it runs (a sort of a large
// array, a pathological regular expression). If a run does not stop soon
// after its limit, Run returns the error anyway and abandons the runtime,
// which finishes on its own goroutine; Abandoned counts those still running.
// The package sets regexp2.DefaultMatchTimeout, unless something else did,
// so that a regular expression cannot keep an abandoned runtime forever.
//
// # Runtimes
//
// A Program keeps the runtimes of its finished runs and gives them to later
// runs, with its top-level code already run: what a run leaves in global
// variables may be seen by a later run of the same Program (the same version
// of one recipient's transform), or may not. A transform must not rely on it
// either way. A run that was stopped leaves its runtime behind. Each runtime
// keeps its own goroutine, on which its runs go.
//
// # Plans
//
// A source that only sets or deletes the request's headers, sets its method, path or query, and sets or
// deletes its body — with string, integer, boolean and null literals, object and array literals, the
// request's own fields, properties and items read from its body, and strings joined with + or a template
// literal — and then returns the request or null is also compiled to a plan, which Run follows without a
// runtime. Its result is the engine's, byte for byte; an input for which it could differ goes to
// the engine.
//
// # Lazy bodies
//
// A JSON object body is given to the function as a proxy that parses the
// body at its first use and then behaves as the parsed object, so that a
// transform that only passes the body on neither parses nor serializes it.
// A program whose runs look into the body gets it parsed up front instead,
// which is cheaper for every use after the first.
package transform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// MaxSource is the largest source Compile accepts.
const MaxSource = 64 << 10

// Default limits, used for the zero fields of Limits.
const (
	DefaultCPU    = 50 * time.Millisecond
	DefaultMemory = 32 << 20
)

// Reasons a run fails, in Error.Reason.
const (
	ReasonThrow   = "THROW"   // the function threw
	ReasonTimeout = "TIMEOUT" // over the CPU limit, or the context is done
	ReasonMemory  = "MEMORY"  // over the memory limit or the call stack depth
	ReasonResult  = "RESULT"  // what the function returned is not a request
)

// sourceName is the file name goja gives the tenant's code; stack frames
// with it are the tenant's, the others are the sandbox's own wrappers.
const sourceName = "transform.js"

// Request is what a transform reads and returns.
type Request struct {
	Method string
	Path   string // after /in/{key}, starting with "/"
	Query  string // raw, without "?"
	Header http.Header
	Body   []byte
}

// Limits bound a run. Zero fields take the defaults.
type Limits struct {
	CPU    time.Duration // default DefaultCPU
	Memory int64         // bytes, default DefaultMemory
}

func (l Limits) withDefaults() Limits {
	if l.CPU <= 0 {
		l.CPU = DefaultCPU
	}
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	return l
}

// SyntaxError is a source that does not parse.
type SyntaxError struct {
	Line, Column int
	Message      string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("syntax error at line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// Error is a run that failed.
type Error struct {
	Reason  string // ReasonThrow, ReasonTimeout, ReasonMemory or ReasonResult
	Message string
	// Line and Column are where in the source the run threw or was stopped,
	// when known; zero otherwise. Message ends with them too.
	Line, Column int
}

func (e *Error) Error() string {
	return "transform: " + e.Message
}

// Program is a compiled transform. It is safe for concurrent Run.
type Program struct {
	prg *goja.Program
	// idle holds workers whose runtimes ran this program to its end, ready for another run: preparing one
	// (the guards build most of goja's built-ins) costs far more than a run. Only runs that ended on their
	// own give theirs back; one that was stopped is dropped. It holds as many as runs may go at once (one
	// per CPU), and is not a sync.Pool, which would drop them at each garbage collection.
	idle chan *worker

	// looks says whether the program's last run with a lazily parsed body looked into it. A lazy body spares
	// parsing and serializing a body that a program only moves, but costs a proxy trap at each use for one
	// that it reads; so a program that looks gets its bodies parsed up front, and every probeEvery-th run
	// checks again.
	looks atomic.Bool
	runs  atomic.Uint64

	// plan runs the program without the engine, when the source is one a plan covers (see plan).
	plan *plan
}

const probeEvery = 64

// Compile checks and compiles a transform's source.
func Compile(source string) (*Program, error) {
	if len(source) > MaxSource {
		return nil, fmt.Errorf("the transform is %d bytes, over the limit of %d", len(source), MaxSource)
	}
	// Source maps are disabled: with them the parser would read a file named
	// in the source.
	tree, err := parser.ParseFile(nil, sourceName, source, 0, parser.WithDisableSourceMaps)
	if err != nil {
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			return nil, &SyntaxError{Line: list[0].Position.Line, Column: list[0].Position.Column, Message: list[0].Message}
		}
		return nil, &SyntaxError{Message: err.Error()}
	}
	if err := checkDeclared(tree); err != nil {
		return nil, err
	}
	prg, err := goja.CompileAST(tree, false)
	if err != nil {
		var se *goja.CompilerSyntaxError
		if errors.As(err, &se) {
			e := &SyntaxError{Message: se.Message}
			if se.File != nil {
				pos := se.File.Position(se.Offset)
				e.Line, e.Column = pos.Line, pos.Column
			}
			return nil, e
		}
		return nil, fmt.Errorf("the transform does not compile: %w", err)
	}
	p := &Program{prg: prg, idle: make(chan *worker, cap(cpus)), plan: compilePlan(tree)}
	runtime.AddCleanup(p, closeIdle, p.idle)
	return p, nil
}

// checkDeclared looks for a top-level declaration of transform, so that a
// source without one is refused when it is saved rather than at its first
// delivery. What the name holds is checked again when it runs.
func checkDeclared(tree *ast.Program) error {
	const missing = "the source defines no function named transform: define function transform(request) { ...; return request; }"
	for _, st := range tree.Body {
		switch st := st.(type) {
		case *ast.FunctionDeclaration:
			if st.Function.Name != nil && st.Function.Name.Name == "transform" {
				return checkSync(st.Function)
			}
		case *ast.VariableStatement:
			if b := findBinding(st.List); b != nil {
				return checkSync(b.Initializer)
			}
		case *ast.LexicalDeclaration:
			if b := findBinding(st.List); b != nil {
				return checkSync(b.Initializer)
			}
		case *ast.ClassDeclaration:
			if st.Class.Name != nil && st.Class.Name.Name == "transform" {
				return errors.New("transform is a class: define it as a function, function transform(request) { ... }")
			}
		case *ast.ExpressionStatement:
			if as, ok := st.Expression.(*ast.AssignExpression); ok {
				if id, ok := as.Left.(*ast.Identifier); ok && id.Name == "transform" {
					return checkSync(as.Right)
				}
			}
		}
	}
	return errors.New(missing)
}

func findBinding(list []*ast.Binding) *ast.Binding {
	for _, b := range list {
		if id, ok := b.Target.(*ast.Identifier); ok && id.Name == "transform" {
			return b
		}
	}
	return nil
}

// checkSync refuses async and generator functions: the delivery needs the
// request itself, not a promise or an iterator.
func checkSync(e ast.Node) error {
	switch f := e.(type) {
	case *ast.FunctionLiteral:
		if f.Async {
			return errors.New("transform is async: it must return the request itself, not a promise")
		}
		if f.Generator {
			return errors.New("transform is a generator: it must return the request itself")
		}
	case *ast.ArrowFunctionLiteral:
		if f.Async {
			return errors.New("transform is async: it must return the request itself, not a promise")
		}
	}
	return nil
}

// Run runs the transform on a request, which it does not change. It returns the changed request, or
// cancel true when the transform returned null. A failed run returns an
// *Error.
func (p *Program) Run(ctx context.Context, in Request, lim Limits) (out Request, cancel bool, err error) {
	lim = lim.withDefaults()
	if err := ctx.Err(); err != nil {
		return Request{}, false, contextError(err)
	}
	if p.plan != nil {
		if out, cancel, ok := p.plan.run(in, lim); ok {
			return out, cancel, nil
		}
	}
	return p.runEngine(ctx, in, lim)
}

// runEngine runs the program in a JavaScript runtime.
func (p *Program) runEngine(ctx context.Context, in Request, lim Limits) (out Request, cancel bool, err error) {
	lim = lim.withDefaults()
	// At most one run per CPU at a time, and its clock starts once it has one: the time limit is measured on
	// the wall clock, which many runs sharing few CPUs would spend waiting.
	var i int
	select {
	case i = <-cpus:
	case <-ctx.Done():
		return Request{}, false, contextError(ctx.Err())
	}
	defer func() { cpus <- i }()
	return p.runSandboxed(ctx, in, lim, &slots[i])
}

func contextError(err error) *Error {
	return &Error{Reason: ReasonTimeout, Message: "the delivery was cancelled while the transform ran: " + err.Error()}
}
