package transform

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

const (
	// maxCallDepth bounds recursion; deeper is almost surely endless, and
	// each frame costs memory the watchdog would only see late.
	maxCallDepth = 4096
	// watchEvery is how often the watchdog samples the allocations.
	watchEvery = time.Millisecond
	// minStuckAfter is the least time a stopped run gets to notice it was
	// stopped before it is abandoned.
	minStuckAfter = 250 * time.Millisecond
	// regexpTimeout ends a backtracking regular expression, which goja runs
	// in one uninterruptible call, so that an abandoned run finishes.
	regexpTimeout = time.Second
	// maxMessage bounds a thrown value quoted in an error message.
	maxMessage = 1024
)

func init() {
	if regexp2.DefaultMatchTimeout == time.Duration(math.MaxInt64) {
		regexp2.DefaultMatchTimeout = regexpTimeout
	}
}

var (
	guardProgram = sync.OnceValues(func() (*goja.Program, error) {
		return goja.Compile("sandbox.js", guardSource, true)
	})
	proxyType = reflect.TypeOf(goja.Proxy{})
	abandoned atomic.Int64
)

// Abandoned is the number of runs that did not stop when told to and still
// run on their own goroutines.
func Abandoned() int {
	return int(abandoned.Load())
}

type sandbox struct {
	vm  *goja.Runtime
	lim Limits
	fn  goja.Callable // the program's transform, once its top level has run
	// stopped is why the run was interrupted; the first reason wins.
	stopped   atomic.Pointer[Error]
	stringify goja.Callable // JSON.stringify as the guards left it
	serialize goja.Callable // the same, for the result's body, with replacer
	replacer  goja.Value    // see replace
	// stash holds the long strings replace took out of the result's body while it was serialized.
	stash []string
	parse goja.Callable // JSON.parse
	// proxy, lazyHandler and rawSym make a body parsed at its first use (see the guards).
	proxy       goja.Value
	lazyHandler goja.Value
	rawSym      *goja.Symbol
	// guardCall calls guarded from JavaScript (see guard).
	guardCall goja.Callable
	guarded   func()

	// lazy says whether this run's JSON object body is parsed at its first use; pending is that body, and
	// marker what an untouched one serializes as in the result.
	lazy    bool
	pending *lazyBody
	marker  string
	// noParse leaves every body to JSON.parse (tests compare parseJSON with it).
	noParse bool
}

// lazyBody is a JSON object body, given to the transform as a proxy over target.
type lazyBody struct {
	raw     []byte
	target  *goja.Object
	proxy   *goja.Object
	touched bool
}

type result struct {
	out    Request
	cancel bool
	err    *Error
}

func newSandbox(lim Limits) (*sandbox, error) {
	guards, err := guardProgram()
	if err != nil {
		return nil, err
	}
	vm := goja.New()
	s := &sandbox{vm: vm, lim: lim}
	// eval is removed, but a source map would be read from a file.
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	vm.SetMaxCallStackSize(maxCallDepth)

	setup, err := vm.RunProgram(guards)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(setup)
	if !ok {
		return nil, errors.New("the sandbox setup is not a function")
	}
	s.marker = newMarker()
	s.rawSym = goja.NewSymbol("raw")
	s.guardCall, _ = goja.AssertFunction(vm.ToValue(func(goja.FunctionCall) goja.Value {
		s.guarded()
		return goja.Undefined()
	}))
	host := vm.NewObject()
	for name, v := range map[string]any{
		"touched": func(call goja.FunctionCall) goja.Value {
			if b := s.pending; b != nil && b.target.SameAs(call.Argument(0)) {
				b.touched = true
			}
			return goja.Undefined()
		},
		"marker":    s.marker,
		"rawSym":    s.rawSym,
		"over":      s.over,
		"isProxy":   func(call goja.FunctionCall) goja.Value { return vm.ToValue(isProxy(call.Argument(0))) },
		"className": func(call goja.FunctionCall) goja.Value { return vm.ToValue(className(call.Argument(0))) },
		"maxBytes":  lim.Memory,
		"maxChars":  lim.Memory / 2,
		"maxElems":  lim.Memory / 16,
	} {
		if err := host.Set(name, v); err != nil {
			return nil, err
		}
	}
	internals, err := fn(goja.Undefined(), vm.GlobalObject(), host)
	if err != nil {
		return nil, err
	}
	obj := internals.ToObject(vm)
	s.stringify, _ = goja.AssertFunction(obj.Get("stringify"))
	s.parse, _ = goja.AssertFunction(obj.Get("parse"))
	s.serialize, _ = goja.AssertFunction(obj.Get("serialize"))
	s.replacer = vm.ToValue(s.replace)
	s.proxy, s.lazyHandler = obj.Get("proxy"), obj.Get("lazyHandler")
	if s.stringify == nil || s.parse == nil || s.serialize == nil || s.proxy == nil || s.lazyHandler == nil {
		return nil, errors.New("the sandbox setup returned no JSON functions")
	}
	return s, nil
}

// newMarker is a string no body or transform can know beforehand: a body serialized as it stands out in the
// result's JSON as this string, quoted.
func newMarker() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "adal-body-" + hex.EncodeToString(b)
}

func isProxy(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	return ok && o.ExportType() == proxyType
}

func className(v goja.Value) string {
	if o, ok := v.(*goja.Object); ok {
		return o.ClassName()
	}
	return ""
}

// over is called by the guards when a built-in would go over the memory
// limit. The interrupt takes effect at the guard's next instruction, so the
// tenant cannot catch it.
func (s *sandbox) over(call goja.FunctionCall) goja.Value {
	s.stop(&Error{Reason: ReasonMemory, Message: fmt.Sprintf("%s would go over the memory limit of %s", call.Argument(0).String(), formatBytes(s.lim.Memory))})
	return goja.Undefined()
}

func (s *sandbox) stop(e *Error) {
	if s.stopped.CompareAndSwap(nil, e) {
		s.vm.Interrupt(e)
	}
}

// worker is a sandbox with the goroutine its runs go on. The goroutine lives as long as the sandbox, so
// that a run neither starts a goroutine nor grows a fresh stack to the depth the runtime needs.
type worker struct {
	s     *sandbox
	jobs  chan job
	done  chan result
	once  sync.Once
	ended chan struct{} // closed when the goroutine has ended
	watch watched       // the run in progress, for the watchdog
}

type job struct {
	prg  *goja.Program
	in   Request
	lazy bool // a JSON object body is parsed at its first use (see Program.looks)
}

func newWorker(lim Limits) (*worker, error) {
	s, err := newSandbox(lim)
	if err != nil {
		return nil, err
	}
	w := &worker{s: s, jobs: make(chan job), done: make(chan result, 1), ended: make(chan struct{}), watch: newWatched(s)}
	go w.loop()
	return w, nil
}

func (w *worker) loop() {
	defer close(w.ended)
	for j := range w.jobs {
		w.s.lazy = j.lazy
		w.done <- w.s.run(j.prg, j.in)
	}
}

// close ends the goroutine once its run, if any, has finished.
func (w *worker) close() { w.once.Do(func() { close(w.jobs) }) }

// worker takes an idle worker of p prepared with the same limits, or a new one.
func (p *Program) worker(lim Limits) (*worker, error) {
	for {
		select {
		case w := <-p.idle:
			if w.s.lim == lim {
				w.s.vm.ClearInterrupt()
				return w, nil
			}
			w.close()
		default:
			return newWorker(lim)
		}
	}
}

// release gives a worker whose run ended on its own back to p, or ends it when p has enough.
func (p *Program) release(w *worker) {
	select {
	case p.idle <- w:
	default:
		w.close()
	}
}

// closeIdle ends the idle workers of a program that is no longer used.
func closeIdle(idle chan *worker) {
	for {
		select {
		case w := <-idle:
			w.close()
		default:
			return
		}
	}
}

// runSandboxed runs the program on a worker's goroutine, in slot sl, while the watchdog watches the clock
// and the allocations and this goroutine the context.
func (p *Program) runSandboxed(ctx context.Context, in Request, lim Limits, sl *slot) (Request, bool, error) {
	r, err := p.worker(lim)
	if err != nil {
		return Request{}, false, &Error{Reason: ReasonThrow, Message: "the sandbox could not be prepared: " + err.Error()}
	}
	s := r.s
	lazy := !p.looks.Load() || p.runs.Add(1)%probeEvery == 0
	sl.begin(&r.watch, lim)
	r.jobs <- job{prg: p.prg, in: in, lazy: lazy}
	ctxDone := ctx.Done()
	for {
		select {
		case res := <-r.done:
			sl.end()
			if b := s.pending; lazy && b != nil {
				p.looks.Store(b.touched)
			}
			if s.stopped.Load() == nil && s.fn != nil {
				p.release(r) // it ended on its own: ready for another run
			} else {
				r.close()
			}
			if res.err != nil {
				return Request{}, false, res.err
			}
			return res.out, res.cancel, nil
		case <-ctxDone:
			ctxDone = nil
			s.stop(contextError(ctx.Err()))
		case <-r.watch.stuck:
			sl.end()
			abandoned.Add(1)
			go func() {
				<-r.done
				r.close()
				abandoned.Add(-1)
			}()
			e := *s.stopped.Load()
			e.Message += "; it did not stop, as it was inside a built-in function, and was abandoned"
			return Request{}, false, &e
		}
	}
}

func (s *sandbox) run(prg *goja.Program, in Request) (r result) {
	defer func() {
		// goja reports JavaScript errors as values; a panic here is a bug in
		// the runtime, which must not take the process down.
		if x := recover(); x != nil {
			r = result{err: &Error{Reason: ReasonThrow, Message: fmt.Sprintf("the JavaScript runtime failed: %v", x)}}
		}
	}()
	if s.fn == nil {
		if _, err := s.vm.RunProgram(prg); err != nil {
			return result{err: s.describe(err)}
		}
		var fn goja.Callable
		var notFn string
		if err := s.guard(func() {
			v := s.vm.Get("transform")
			if fn, _ = goja.AssertFunction(v); fn == nil {
				notFn = typeName(v)
			}
		}); err != nil {
			return result{err: s.describe(err)}
		}
		if fn == nil {
			return result{err: &Error{Reason: ReasonThrow, Message: "transform is not a function: it is " + notFn}}
		}
		s.fn = fn
	}
	req, err := s.request(in)
	if err != nil {
		return result{err: s.describe(err)}
	}
	v, err := s.fn(goja.Undefined(), req)
	if err != nil {
		return result{err: s.describe(err)}
	}
	if err := s.guard(func() { r = s.result(v, in) }); err != nil {
		return result{err: s.describe(err)}
	}
	return r
}

// guard runs f as a function called from JavaScript, which is how goja
// catches the exceptions and interrupts of any JavaScript that f causes to
// run (getters, toString, proxies).
func (s *sandbox) guard(f func()) error {
	outer := s.guarded
	s.guarded = f
	defer func() { s.guarded = outer }()
	_, err := s.guardCall(goja.Undefined())
	return err
}

// isStop reports whether err stops the run: the tenant cannot catch it.
func isStop(err error) bool {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	return errors.As(err, &ie) || errors.As(err, &so)
}

// rethrowStop passes a stop on from a call made inside guard.
func rethrowStop(err error) {
	if isStop(err) {
		panic(err)
	}
}

func (s *sandbox) describe(err error) *Error {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		e, _ := ie.Value().(*Error)
		if e == nil {
			e = &Error{Reason: ReasonTimeout, Message: "the transform was interrupted"}
		}
		out := *e
		out.at(ie.Stack())
		return &out
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		e := &Error{Reason: ReasonMemory, Message: fmt.Sprintf("the call stack went over %d calls: is there an endless recursion?", maxCallDepth)}
		e.at(so.Stack())
		return e
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		e := &Error{Reason: ReasonThrow, Message: s.thrownText(ex.Value())}
		e.at(ex.Stack())
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Reason: ReasonThrow, Message: err.Error()}
}

// at adds the innermost position in the tenant's source.
func (e *Error) at(stack []goja.StackFrame) {
	for i := range stack {
		if stack[i].SrcName() != sourceName {
			continue
		}
		pos := stack[i].Position()
		if pos.Line > 0 {
			e.Line, e.Column = pos.Line, pos.Column
			e.Message += fmt.Sprintf(" at %d:%d", pos.Line, pos.Column)
		}
		return
	}
}

// thrownText prints a thrown value. Printing an object runs its code, so it
// is guarded too.
func (s *sandbox) thrownText(v goja.Value) string {
	var text string
	if err := s.guard(func() { text = s.valueText(v) }); err != nil {
		if _, isObj := v.(*goja.Object); isObj || v == nil {
			return "an exception that cannot be printed"
		}
		text = v.String()
	}
	return truncate(text, maxMessage)
}

func (s *sandbox) valueText(v goja.Value) string {
	o, ok := v.(*goja.Object)
	if !ok {
		if v == nil {
			return "undefined"
		}
		return v.String()
	}
	if o.ClassName() == "Error" {
		return o.String()
	}
	j, err := s.stringify(goja.Undefined(), o)
	rethrowStop(err)
	if err == nil && goja.IsString(j) {
		return j.String()
	}
	return o.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func typeName(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	case goja.IsString(v):
		return "a string"
	case goja.IsNumber(v):
		return "a number"
	case goja.IsBigInt(v):
		return "a bigint"
	}
	if o, ok := v.(*goja.Object); ok {
		switch o.ClassName() {
		case "Array":
			return "an array"
		case "Function":
			return "a function"
		case "Promise":
			return "a promise"
		}
		return "an object"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "a symbol"
	}
	if _, ok := v.Export().(bool); ok {
		return "a boolean"
	}
	return "a " + v.ExportType().String()
}

func formatBytes(n int64) string {
	switch {
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
