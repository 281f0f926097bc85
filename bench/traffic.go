package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// trafficEnv, in the environment of the bench binary, makes it a traffic process; its value is the receiver's
// Refusal as JSON.
const trafficEnv = "ADAL_BENCH_TRAFFIC"

// IsTrafficProcess reports whether this process was started by a bench as its traffic process: the bench's
// main must then call ServeTraffic instead of running scenarios.
func IsTrafficProcess() bool { return os.Getenv(trafficEnv) != "" }

// Refusal makes the receiver answer 503 to attempt number Attempt of every request whose ID is a multiple of
// Every; the zero Refusal answers 200 to everything.
type Refusal struct {
	Attempt int
	Every   int64
}

func (r Refusal) respond() func(requestID int64, attempt int) int {
	if r.Every == 0 {
		return nil
	}
	return func(id int64, attempt int) int {
		if attempt == r.Attempt && id%r.Every == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
}

// Traffic is the load generator and the recipients' receiver of one scenario, in a process of their own (the
// bench binary run again with trafficEnv set). The Adal process under test then has the bench process to
// itself, as a server has in a deployment: its heap, its goroutines (the collector scans their stacks), its
// peak RSS and a CPU profile of it are the server's alone, not mixed with the load generator's connections and
// the receiver's. The two processes still share the machine's cores, and the cores each keeps busy are
// reported apart.
type Traffic struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser // closing it ends the process
	control  string         // http://127.0.0.1:port of the control API
	receiver string         // base URL recipients point at
	client   *http.Client
	closed   bool
}

// startTraffic starts a traffic process whose receiver answers by refuse, and makes it the one whose CPU the
// measurements report.
func (b *Runner) startTraffic(refuse Refusal) (*Traffic, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	policy, _ := json.Marshal(refuse)
	cmd := exec.Command(exe)
	// GOGC and GOMEMLIMIT given to the bench tune the server under test; the traffic runs with the defaults.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=")
	})
	cmd.Env = append(env, trafficEnv+"="+string(policy))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start traffic process: %w", err)
	}
	t := &Traffic{cmd: cmd, stdin: stdin, client: &http.Client{}}
	addrs := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addrs <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-addrs:
		control, receiver, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			t.Close()
			return nil, fmt.Errorf("traffic process: announced %q, want its control and receiver URLs", line)
		}
		t.control, t.receiver = control, receiver
	case <-time.After(30 * time.Second):
		t.Close()
		return nil, errors.New("traffic process: no URLs announced within 30 s")
	}
	b.traffic = t
	return t, nil
}

// ReceiverURL is the base URL recipients point at.
func (t *Traffic) ReceiverURL() string { return t.receiver }

// Pid is the traffic process's ID.
func (t *Traffic) Pid() int { return t.cmd.Process.Pid }

// Close ends the traffic process and waits for it.
func (t *Traffic) Close() {
	t.closed = true
	t.stdin.Close()
	done := make(chan struct{})
	go func() { _ = t.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = t.cmd.Process.Kill()
		<-done
	}
}

// Run runs a load from the traffic process and returns what it saw.
func (t *Traffic) Run(ctx context.Context, l Load) (LoadResult, error) {
	var res LoadResult
	err := t.call(ctx, http.MethodPost, "/load", l, &res)
	return res, err
}

// Received is the number of attempts the receiver has seen since it started or was last reset.
func (t *Traffic) Received(ctx context.Context) (int64, error) {
	var n int64
	err := t.call(ctx, http.MethodGet, "/received", nil, &n)
	return n, err
}

// Shaped is the number of those attempts that arrived as the shaping scenario's transformation makes them.
func (t *Traffic) Shaped(ctx context.Context) (int64, error) {
	var n int64
	err := t.call(ctx, http.MethodGet, "/shaped", nil, &n)
	return n, err
}

// Arrivals returns everything the receiver has seen.
func (t *Traffic) Arrivals(ctx context.Context) ([]Arrival, error) {
	var a []Arrival
	err := t.call(ctx, http.MethodGet, "/arrivals", nil, &a)
	return a, err
}

// Release lets the receiver's held calls (under hangPath) go, and the later ones through.
func (t *Traffic) Release(ctx context.Context) error {
	return t.call(ctx, http.MethodPost, "/release", nil, nil)
}

// Reset makes the receiver forget what it has seen.
func (t *Traffic) Reset(ctx context.Context) error {
	return t.call(ctx, http.MethodPost, "/reset", nil, nil)
}

// awaitReceived polls the receiver until it has seen n attempts or within has passed, and returns the last
// count it read.
func (t *Traffic) awaitReceived(ctx context.Context, n int64, within time.Duration) (int64, error) {
	return t.awaitReceivedUnless(ctx, n, within, nil)
}

// awaitReceivedUnless is awaitReceived that also gives up when gone is closed (the sender of the attempts went
// away: they will not come); a nil gone never is.
func (t *Traffic) awaitReceivedUnless(ctx context.Context, n int64, within time.Duration, gone <-chan struct{}) (int64, error) {
	deadline := time.Now().Add(within)
	for {
		got, err := t.Received(ctx)
		if err != nil || got >= n || !time.Now().Before(deadline) {
			return got, err
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-gone:
			return got, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// call sends in (gob) to the control API and decodes the answer into out.
func (t *Traffic) call(ctx context.Context, method, path string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		if err := gob.NewEncoder(&body).Encode(in); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, t.control+path, &body)
	if err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("traffic %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("traffic %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	return gob.NewDecoder(resp.Body).Decode(out)
}

// ServeTraffic is the traffic process: a receiver and a control API on loopback, their URLs announced on
// stdout as one line, served until stdin closes (the bench closes it, or exits and the pipe closes with it).
func ServeTraffic() error {
	var refuse Refusal
	if err := json.Unmarshal([]byte(os.Getenv(trafficEnv)), &refuse); err != nil {
		return fmt.Errorf("%s: %w", trafficEnv, err)
	}
	rcv := newReceiver(refuse.respond())
	defer rcv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: trafficAPI(rcv)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, err := fmt.Printf("http://%s %s\n", ln.Addr(), rcv.URL()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// trafficAPI is the control API of a traffic process; bodies are gob.
func trafficAPI(rcv *Receiver) http.Handler {
	reply := func(w http.ResponseWriter, v any) {
		if err := gob.NewEncoder(w).Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, "bench traffic: reply:", err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /load", func(w http.ResponseWriter, r *http.Request) {
		var l Load
		if err := gob.NewDecoder(r.Body).Decode(&l); err != nil {
			http.Error(w, "load: "+err.Error(), http.StatusBadRequest)
			return
		}
		reply(w, l.Run(r.Context()))
	})
	mux.HandleFunc("GET /received", func(w http.ResponseWriter, r *http.Request) { reply(w, rcv.Count()) })
	mux.HandleFunc("GET /shaped", func(w http.ResponseWriter, r *http.Request) { reply(w, rcv.Shaped()) })
	mux.HandleFunc("GET /arrivals", func(w http.ResponseWriter, r *http.Request) { reply(w, rcv.Arrivals()) })
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) { rcv.Reset() })
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) { rcv.Release() })
	return mux
}

// procStat returns the fields of /proc/<pid>/stat from the third (the state) on: f[0] is field 3. The command
// name, field 2, is in parentheses and may hold spaces, so fields are counted after it.
func procStat(pid int) (f [][]byte, ok bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return nil, false
	}
	return bytes.Fields(raw[i+1:]), true
}

// processCPU is the user and system CPU time process pid has spent, from /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, bool) {
	f, ok := procStat(pid)
	if !ok || len(f) < 13 { // utime and stime are fields 14 and 15
		return 0, false
	}
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}
