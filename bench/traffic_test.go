package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestMain makes the test binary serve as the traffic process when a test starts it as one, as cmd/bench
// does.
func TestMain(m *testing.M) {
	if IsTrafficProcess() {
		if err := ServeTraffic(); err != nil {
			fmt.Fprintln(os.Stderr, "traffic:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTrafficProcess starts a real traffic process, runs a load from it against an inbound stand-in that
// answers 202 with a request ID and forwards each body to the traffic process's receiver, and reads back what
// both sides saw: every scheduled request with its ID, every arrival with its attempt, the receiver's refusal
// of attempt 2 of every tenth request, and a reset that forgets the arrivals.
func TestTrafficProcess(t *testing.T) {
	b := &Runner{}
	tr, err := b.startTraffic(Refusal{Attempt: 2, Every: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	if b.traffic != tr || !pidAlive(tr.Pid()) {
		t.Fatalf("traffic process %d not running or not the runner's", tr.Pid())
	}
	ctx := t.Context()
	var next atomic.Int64
	inbound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := next.Add(1)
		body, _ := io.ReadAll(r.Body)
		fwd, _ := http.NewRequest(http.MethodPost, tr.ReceiverURL()+"/hook", bytes.NewReader(body))
		fwd.Header.Set("X-Adal-Request-Id", strconv.FormatInt(id, 10))
		fwd.Header.Set("X-Adal-Attempt", "1")
		resp, err := http.DefaultClient.Do(fwd)
		if err != nil || resp.StatusCode != http.StatusOK {
			http.Error(w, fmt.Sprint("forward: ", err), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"requestId":"%d"}`, id)
	}))
	t.Cleanup(inbound.Close)

	res, err := tr.Run(ctx, Load{Rate: 200, Duration: 250 * time.Millisecond, Targets: []string{inbound.URL}, Body: body1K(),
		Conns: 4, KeepIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 50 || res.Accepted() != 50 {
		t.Fatalf("%d requests, %d accepted; want 50 and 50", len(res.Requests), res.Accepted())
	}
	ids := map[int64]bool{}
	for i, s := range res.Requests {
		if s.RequestID == 0 || s.Scheduled.Before(res.Start) || s.Latency <= 0 {
			t.Fatalf("request %d came back as %+v (run started %v)", i, s, res.Start)
		}
		ids[s.RequestID] = true
	}
	if len(ids) != 50 {
		t.Fatalf("%d distinct request IDs, want 50", len(ids))
	}
	if n, err := tr.awaitReceived(ctx, 50, 10*time.Second); err != nil || n != 50 {
		t.Fatalf("received %d (%v), want 50", n, err)
	}
	arrivals, err := tr.Arrivals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range arrivals {
		if !ids[a.RequestID] || a.Attempt != 1 || a.At.Before(res.Start) {
			t.Fatalf("arrival %+v is not one of the run's first attempts", a)
		}
	}

	// The refusal: attempt 2 of request 10 is refused, of request 11 accepted, and both are noted.
	for id, want := range map[int64]int{10: http.StatusServiceUnavailable, 11: http.StatusOK} {
		req, _ := http.NewRequest(http.MethodPost, tr.ReceiverURL()+"/hook", nil)
		req.Header.Set("X-Adal-Request-Id", strconv.FormatInt(id, 10))
		req.Header.Set("X-Adal-Attempt", "2")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("attempt 2 of request %d: %d, want %d", id, resp.StatusCode, want)
		}
	}
	if n, err := tr.Received(ctx); err != nil || n != 52 {
		t.Fatalf("received %d (%v), want 52", n, err)
	}
	if err := tr.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Received(ctx); err != nil || n != 0 {
		t.Fatalf("received %d (%v) after a reset, want 0", n, err)
	}
	if a, err := tr.Arrivals(ctx); err != nil || len(a) != 0 {
		t.Fatalf("%d arrivals (%v) after a reset, want none", len(a), err)
	}

	// Its CPU time is readable while it runs, and the runner stops reading it once it is closed.
	if _, ok := processCPU(tr.Pid()); !ok {
		t.Fatal("the traffic process's CPU time could not be read")
	}
	tr.Close()
	if pidAlive(tr.Pid()) {
		t.Fatalf("traffic process %d still running after Close", tr.Pid())
	}
	if r := readCPU(tr); r.tOK {
		t.Fatal("a closed traffic process's CPU was read")
	}
	if _, err := tr.Received(context.Background()); err == nil {
		t.Fatal("a closed traffic process answered")
	}
}

// TestProcessCPUReadsThisProcess: the parser of /proc/<pid>/stat finds this process's CPU time, and grows with
// work done.
func TestProcessCPUReadsThisProcess(t *testing.T) {
	before, ok := processCPU(os.Getpid())
	if !ok {
		t.Skip("no /proc on this system")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		x := 0
		for i := range 10_000_000 {
			x ^= i
		}
		_ = x
		after, _ := processCPU(os.Getpid())
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v through 5 s of work", before)
		}
	}
}

// pidAlive reports whether process pid exists and is not a zombie.
func pidAlive(pid int) bool {
	f, ok := procStat(pid)
	return ok && len(f) > 0 && string(f[0]) != "Z"
}
