package bench

import (
	"context"
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
	"sync"
	"time"

	"github.com/lib/pq"
)

// The kill run's settings: a short lease and rescue interval, so that the survivor takes the killed process's
// claims over within seconds instead of the defaults' minute, and a short retry unit, so that what it rescues
// is attempted again at once.
const (
	killLease          = 5 * time.Second
	killRescueInterval = time.Second
	killRetryUnit      = 100 * time.Millisecond
)

// sustainedShare is the share of its offered rate a step must accept, besides answering every request 202, to
// be sustained: below it the answers fell behind the schedule and a queue built up.
const sustainedShare = 0.95

// serverPoolConns is the most connections one cmd/server process opens to PostgreSQL (storage.Connect's pool),
// besides its listener's.
const serverPoolConns = 32

// cluster measures Adal as a cluster: for each of ClusterProcesses, that many cmd/server processes — the real
// binary, each an OS process of its own on a loopback port of its own, configured by its ADAL_* variables — on
// one fresh database. Each size burns down ClusterDeliveries due deliveries (attempts/s, every attempt received
// once), then looks for its intake ceiling: the highest rate, among ClusterRates and one halfway step, spread
// over the processes' inbound URLs, that is answered 202 throughout. Both report their cost per unit of work in database transactions, WAL
// and the servers' CPU, and every size's figures as a ratio of the first size's. Last, a kill run: two
// processes under load, one killed with SIGKILL halfway through, after which nothing answered 202 may be lost.
func (b *Runner) cluster(ctx context.Context) error {
	bin, err := b.binary(ctx, &b.cfg.ServerBinary, "server", "-server-binary")
	if err != nil {
		return err
	}
	tr, err := b.startTraffic(Refusal{})
	if err != nil {
		return err
	}
	defer tr.Close()
	// An Adal process in the bench makes the database (fresh and migrated) and the fixtures through its API,
	// then stops: only the cluster's processes run on the database.
	p, err := b.startProcess("cluster", nil)
	if err != nil {
		return err
	}
	defer p.Close()
	c := &cluster{b: b, bin: bin, p: p, tr: tr, paused: b.cfg.IngestRecipients == "paused"}
	if err := c.setup(); err != nil {
		return err
	}
	p.stopRelay()
	b.adalCPU = c.cpu
	defer func() { b.adalCPU = nil }()
	defer c.stop()
	c.checkConnections(ctx)
	var runs []clusterRun
	for _, n := range b.cfg.ClusterProcesses {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := c.run(ctx, n, runs)
		if err != nil {
			return fmt.Errorf("%d processes: %w", n, err)
		}
		runs = append(runs, r)
	}
	rate, why := killRate(runs, b.cfg.ClusterRates)
	return c.kill(ctx, rate, why)
}

// cluster is the cluster scenario's state: its database, its traffic, its fixtures and the cmd/server
// processes running now.
type cluster struct {
	b   *Runner
	bin string   // cmd/server
	p   *Process // the database and the bench's connections to it; its in-process relay is stopped
	tr  *Traffic
	// paused is IngestRecipients: the intake fixture's recipients are paused (pure intake), or deliver to the
	// receiver.
	paused bool
	// intake is 100 tenants × 1 recipient for the ceiling, due 10 × 10 for the burn-down, victims 10 × 1
	// delivering to the receiver for the kill run; their inbound URLs are on the stopped relay (see spread).
	intake, due, victims *Fixture
	procs                []*server
}

// server is one cmd/server process of the cluster.
type server struct {
	*child
	url       string // http://127.0.0.1:port
	killed    bool
	killedCPU time.Duration // what it had spent when it was killed
}

// clusterRun is what one size of the cluster measured.
type clusterRun struct {
	n        int
	ceiling  float64 // requests/s; 0 when no rate was sustained
	atLeast  bool    // the ceiling is a lower bound: every rate offered was sustained
	attempts float64 // per second, in the burn-down
}

// setup creates the fixtures through the in-process relay's API, as every scenario does.
func (c *cluster) setup() error {
	target := "http://127.0.0.1:9" // never called: the recipients are paused
	if !c.paused {
		target = c.tr.ReceiverURL()
	}
	var err error
	if c.intake, err = c.p.setup(100, 1, target, c.paused); err != nil {
		return fmt.Errorf("intake fixture: %w", err)
	}
	if c.due, err = c.p.setup(10, 10, c.tr.ReceiverURL(), false); err != nil {
		return fmt.Errorf("burn-down fixture: %w", err)
	}
	if c.victims, err = c.p.setup(10, 1, c.tr.ReceiverURL(), false); err != nil {
		return fmt.Errorf("kill fixture: %w", err)
	}
	return nil
}

// checkConnections logs when the largest size may open more connections than PostgreSQL accepts: its
// processes would then see errors no single process does.
func (c *cluster) checkConnections(ctx context.Context) {
	var limit int
	if err := c.p.admin.QueryRowContext(ctx, `SELECT current_setting('max_connections')::int`).Scan(&limit); err != nil {
		return
	}
	if most := slices.Max(c.b.cfg.ClusterProcesses); most*(serverPoolConns+2) > limit {
		c.b.logf("cluster: %d processes may open up to %d connections each; PostgreSQL's max_connections is %d",
			most, serverPoolConns+2, limit)
	}
}

// run measures n processes: the burn-down, then the intake ceiling, each adding its row. before are the sizes
// measured so far, the first of which the scaling is a ratio of. Intake has no warm-up of its own: the bulk
// insert leaves the tables analyzed and the burn-down the processes' pools open.
func (c *cluster) run(ctx context.Context, n int, before []clusterRun) (clusterRun, error) {
	r := clusterRun{n: n}
	var base *clusterRun
	if len(before) > 0 {
		base = &before[0]
	}
	if err := c.reset(ctx); err != nil {
		return r, err
	}
	total := c.b.cfg.ClusterDeliveries
	c.b.logf("cluster: %d processes: inserting %d due deliveries", n, total)
	err := insertDue(ctx, c.p.DB, c.due, bulkDue{
		KeyPrefix: "due-", From: 0, To: int64(total - 1), Body: body1K(), Due: time.Now().Add(-time.Second),
	})
	if err != nil {
		return r, err
	}
	// No process of this run exists yet, and the last run's published everything as they exited.
	xactsBefore, err := c.xacts(ctx, false)
	if err != nil {
		return r, err
	}
	defer c.stop()
	// Started together, the processes claim the backlog as each comes up: the burn-down's window begins once a
	// fifth of it is delivered, when all of them are at work.
	if err := c.start(ctx, n); err != nil {
		return r, err
	}
	var xactsAfter int64
	if r.attempts, xactsAfter, err = c.burnDown(ctx, n, base, xactsBefore); err != nil {
		return r, err
	}
	r.ceiling, r.atLeast, err = c.intakeCeiling(ctx, n, base, xactsAfter)
	return r, err
}

// reset empties the tables each run fills, so that every size starts from the same database, and makes the
// receiver forget what it saw. The planner's statistics are refreshed by whatever the run inserts first.
func (c *cluster) reset(ctx context.Context) error {
	if _, err := c.p.DB.ExecContext(ctx, `TRUNCATE requests, deliveries, attempts`); err != nil {
		return fmt.Errorf("empty the tables: %w", err)
	}
	return c.tr.Reset(ctx)
}

// start starts n cmd/server processes on the database, each on a loopback port of its own, and waits until
// every one answers /readyz. extra are ADAL_* settings beyond the common ones.
func (c *cluster) start(ctx context.Context, n int, extra ...string) error {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "ADAL_") })
	env = append(env, "ADAL_DATABASE_URL="+c.p.dbURL, "ADAL_JWT_SECRET="+benchJWTSecret, "ADAL_DATA_DIR="+os.TempDir(),
		"ADAL_ALLOW_PRIVATE_TARGETS=true", // the receiver is on loopback
		"ADAL_LOG_LEVEL=warn")
	if w := c.b.cfg.DispatchWorkers; w > 0 {
		env = append(env, "ADAL_WORKERS="+strconv.Itoa(w))
	}
	if k := c.b.cfg.IntakeCommitters; k > 0 {
		env = append(env, "ADAL_INTAKE_COMMITTERS="+strconv.Itoa(k))
	}
	env = append(env, extra...)
	for i := range n {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return err
		}
		cmd := exec.Command(c.bin, "serve")
		cmd.Env = append(slices.Clip(env), "ADAL_ADDR="+addr, "ADAL_PUBLIC_URL=http://"+addr)
		dieWithBench(cmd)
		ch, err := startChild(cmd, fmt.Sprintf("bench cluster: server %d of %d", i+1, n))
		if err != nil {
			return fmt.Errorf("start cmd/server: %w", err)
		}
		c.procs = append(c.procs, &server{child: ch, url: "http://" + addr})
	}
	for _, s := range c.procs {
		if err := s.awaitReady(ctx, time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago, for a process to listen on.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// awaitReady waits until the process answers /readyz (its database reachable, its listener open).
func (s *server) awaitReady(ctx context.Context, within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cmd/server on %s not ready within %v; it said:\n%s", s.url, within, s.lastLines())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return fmt.Errorf("cmd/server on %s exited before it was ready; it said:\n%s", s.url, s.lastLines())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill ends the process with SIGKILL, as a crash or the OOM killer would: nothing of it stops in order. Its CPU
// time is read first, for the run's total.
func (s *server) kill() error {
	s.killedCPU, _ = processCPU(s.cmd.Process.Pid)
	s.killed = true
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	<-s.done
	return nil
}

// stop stops the processes still running, as an operator's Ctrl-C does, and forgets them all.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, s := range c.procs {
		if !s.killed {
			wg.Go(s.stop)
		}
	}
	wg.Wait()
	c.procs = nil
}

// exited reports a process that ended without being told to, with its last words.
func (c *cluster) exited() error {
	for i, s := range c.procs {
		if s.killed {
			continue
		}
		select {
		case <-s.done:
			return fmt.Errorf("cmd/server %d of %d exited; it said:\n%s", i+1, len(c.procs), s.lastLines())
		default:
		}
	}
	return nil
}

// cpu is the CPU time the processes of the current run have spent, the killed one's up to its kill; not ok
// while no run is on, or a process cannot be read.
func (c *cluster) cpu() (time.Duration, bool) {
	if len(c.procs) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, s := range c.procs {
		if s.killed {
			sum += s.killedCPU
			continue
		}
		d, ok := processCPU(s.cmd.Process.Pid)
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// measure starts a measured phase: the Runner's, and a new peak-RSS window for every process.
func (c *cluster) measure() {
	c.b.startMeasure()
	for _, s := range c.procs {
		if !s.killed {
			clearPeakRSS(strconv.Itoa(s.cmd.Process.Pid))
		}
	}
}

// peakRSS is the largest VmHWM among the processes still running.
func (c *cluster) peakRSS() int64 {
	var most int64
	for _, s := range c.procs {
		if !s.killed {
			most = max(most, s.child.peakRSS())
		}
	}
	return most
}

// spread lists each of fx's servers once per running process, with its inbound URL on that process, server by
// server: a load's round robin over the list sends each process an equal share of every server's requests.
func (c *cluster) spread(fx *Fixture) *Fixture {
	out := &Fixture{}
	for _, s := range fx.Servers {
		path := strings.TrimPrefix(s.InboundURL, c.p.URL)
		for _, p := range c.procs {
			s.InboundURL = p.url + path
			out.Servers = append(out.Servers, s)
		}
	}
	return out
}

// meter reads the costs of the cluster's work: the processes' CPU time and the server's WAL position. Their
// statements and heap allocations cannot be read from here; their transactions are counted apart (xacts).
func (c *cluster) meter() costMeter {
	return costMeter{cpu: c.cpu, wal: walPosition(c.p.admin)}
}

// sample reads the WAL position and the processes' CPU time, at once: an edge of a measured window.
func (c *cluster) sample(ctx context.Context) costSample {
	return c.meter().sample(ctx)
}

// statsSettle is how long the processes are left to idle before their transactions are counted. PostgreSQL
// publishes a backend's counts when it goes idle, a busy one's at most once a second and one used now and then
// only once it has idled for 10 s (PGSTAT_IDLE_INTERVAL): a count read while the load runs, or just after,
// misses seconds of it.
const statsSettle = 11 * time.Second

// xacts reads the transactions of the scenario's database so far (xact_commit + xact_rollback), from the
// bench's connection to another database, so that reading them does not count. settle first waits for the
// running processes to publish theirs, a wait the measurement's CPU figures leave out.
func (c *cluster) xacts(ctx context.Context, settle bool) (int64, error) {
	if settle {
		err := c.b.pauseMeasure(func() error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(statsSettle):
				return nil
			}
		})
		if err != nil {
			return 0, err
		}
	}
	var n int64
	err := c.p.admin.QueryRowContext(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`,
		c.p.dbName).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return n, nil
}

// transactionsPer states transactions per unit of work, for the log.
func transactionsPer(xacts, units int64, unit string) string {
	if units <= 0 {
		return "no " + unit
	}
	return fmt.Sprintf("%s transactions per %s", sig3(float64(xacts)/float64(units)), unit)
}

// sampleAt samples at the time given.
func (c *cluster) sampleAt(ctx context.Context, at time.Time) (costSample, error) {
	select {
	case <-ctx.Done():
		return costSample{}, ctx.Err()
	case <-time.After(time.Until(at)):
	}
	return c.sample(ctx), nil
}

// costNote says where a row's costs come from.
const costNote = "cost§: transactions = the database's pg_stat_database xact_commit + xact_rollback, read 11 s after " +
	"the work, once published (statements cannot be counted across processes: pg_stat_statements is not loaded); WAL " +
	"from pg_current_wal_lsn() (the whole server's), CPU of the cmd/server processes from /proc, both over the " +
	"steady window"

// scaling is x as a ratio of the first size's figure, for a row's figure; empty for the first size itself.
// bound is "≤ " when the first size's figure is a lower bound, "≥ " when x is one.
func scaling(x float64, base *clusterRun, of func(clusterRun) float64, bound string) string {
	if base == nil || of(*base) <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%s%.2f× n=%d)", bound, x/of(*base), base.n)
}

// arrivalRepeats are the arrivals beyond a request's first. The receiver answers 200 to every one, so each is
// a delivery made again: under the same attempt number (a duplicate: an attempt is sent once, whatever the
// number of processes), or under a later one (a redelivery: at least once allows it when an attempt's outcome
// was lost with its process).
type arrivalRepeats struct {
	sameAttempt int // arrivals of a (request, attempt) received before
	redelivered int // requests received under more than one attempt number
}

func repeatsOf(arrivals []Arrival) arrivalRepeats {
	type key struct {
		id      int64
		attempt int
	}
	seen := make(map[key]bool, len(arrivals))
	numbers := make(map[int64]int, len(arrivals)) // attempt numbers received, by request
	var r arrivalRepeats
	for _, a := range arrivals {
		k := key{a.RequestID, a.Attempt}
		if seen[k] {
			r.sameAttempt++
			continue
		}
		seen[k] = true
		if numbers[a.RequestID]++; numbers[a.RequestID] == 2 {
			r.redelivered++
		}
	}
	return r
}

func (r arrivalRepeats) String() string {
	return fmt.Sprintf("received again %d (the same attempt %d, a later attempt %d)", r.sameAttempt+r.redelivered,
		r.sameAttempt, r.redelivered)
}

// burnDown waits for the receiver to have every due delivery and the table to hold none open, reads the rate,
// WAL and CPU between a fifth and four fifths received (every process at work, none starting or done) and the
// transactions from before (xactsBefore, read before the processes started) to statsSettle after, and adds the
// dispatch row. It returns the attempts per second and the transactions then.
func (c *cluster) burnDown(ctx context.Context, n int, base *clusterRun, xactsBefore int64) (float64, int64, error) {
	b := c.b
	total := int64(b.cfg.ClusterDeliveries)
	c.measure()
	start := time.Now()
	var from, to costSample
	var fromN, toN int64
	for {
		if err := c.exited(); err != nil {
			return 0, 0, err
		}
		got, err := c.tr.Received(ctx)
		if err != nil {
			return 0, 0, err
		}
		if from.at.IsZero() && got >= total/5 {
			from, fromN = c.sample(ctx), got
		}
		if to.at.IsZero() && got >= total*4/5 {
			to, toN = c.sample(ctx), got
		}
		if got >= total {
			open, err := c.p.count(`SELECT COUNT(*) FROM deliveries WHERE status IN ('PENDING', 'IN_PROGRESS')`)
			if err != nil {
				return 0, 0, err
			}
			if open == 0 {
				break
			}
		}
		if time.Since(start) > 10*time.Minute {
			return 0, 0, fmt.Errorf("burn-down: %d of %d deliveries received after %v", got, total, time.Since(start))
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	rss := c.peakRSS()
	xactsAfter, err := c.xacts(ctx, true)
	if err != nil {
		return 0, 0, err
	}
	attempts, succeeded, err := c.p.countBoth(`SELECT COUNT(*) FROM attempts`,
		`SELECT COUNT(*) FROM deliveries WHERE status = 'SUCCEEDED'`)
	if err != nil {
		return 0, 0, err
	}
	arrivals, err := c.tr.Arrivals(ctx)
	if err != nil {
		return 0, 0, err
	}
	rep := repeatsOf(arrivals)
	window := costBetween(from, to, toN-fromN, "attempt")
	overall := 0.0
	if len(arrivals) > 1 {
		first, last := arrivals[0].At, arrivals[0].At
		for _, a := range arrivals {
			first, last = minTime(first, a.At), maxTime(last, a.At)
		}
		if d := last.Sub(first); d > 0 {
			overall = float64(len(arrivals)) / d.Seconds()
		}
	}
	// A backlog delivered within one poll of the receiver leaves no window: its rate is the arrivals' span's.
	rate := window.Rate()
	if rate == 0 {
		rate = overall
	}
	row := Row{
		Scenario: fmt.Sprintf("cluster n=%d dispatch", n),
		Figure:   fmt.Sprintf("%.0f attempts/s%s", rate, scaling(rate, base, func(r clusterRun) float64 { return r.attempts }, "")),
		Detail: fmt.Sprintf("%d attempts, %d succeeded, %d received; %s; first → last arrival %.0f/s; cost§: transactions from the processes' start, WAL and CPU between a fifth and four fifths received",
			attempts, succeeded, len(arrivals), rep, overall),
		Target: fmt.Sprintf("every attempt received once: %s", met(rep.sameAttempt+rep.redelivered == 0)),
		Settings: fmt.Sprintf("%d cmd/server process(es) on one database, started together on %d due deliveries (bulk-inserted, 1 KiB bodies) over 10 tenants × 10 recipients; receiver answers 200 at once; workers %s per process; %s",
			n, total, workers(b.cfg.DispatchWorkers), costNote),
		PeakRSS: rss,
		Cost:    window.withTransactions(xactsAfter-xactsBefore, attempts),
	}
	var void []string
	if attempts != total || succeeded != total || int64(len(arrivals)) != total {
		void = append(void, fmt.Sprintf("%d attempts, %d succeeded and %d received for %d deliveries", attempts, succeeded, len(arrivals), total))
	}
	if rep.sameAttempt+rep.redelivered > 0 {
		void = append(void, rep.String())
	}
	row.Void = strings.Join(void, "; ")
	b.add(row)
	return rate, xactsAfter, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// clusterStep is one offered rate of the ceiling's search.
type clusterStep struct {
	rate, accepted float64 // offered, and accepted per second
	answered202    int
	others, failed int // answers other than 202; requests without an answer
	p99            time.Duration
	cost           Cost
	sustained      bool
}

func (s clusterStep) String() string {
	out := fmt.Sprintf("%.0f → %.0f/s (p99 %s", s.rate, s.accepted, ms(s.p99))
	if s.others+s.failed > 0 {
		out += fmt.Sprintf(", non-202 %d, unanswered %d", s.others, s.failed)
	}
	if !s.sustained {
		out += ", not sustained"
	}
	return out + ")"
}

// intakeCeiling looks for the intake ceiling: ClusterRates in turn, each spread over the processes' inbound
// URLs for Duration, up to the first one not sustained, then once halfway between it and the last sustained
// one, which halves the uncertainty the rates' spacing leaves for one step more. Each step's WAL and CPU are
// read over its steady part, from a fifth of it to its end; the first step's transactions from before it
// (xactsBefore) to statsSettle after it. It adds the intake row and returns the ceiling, and whether it is only
// a lower bound.
func (c *cluster) intakeCeiling(ctx context.Context, n int, base *clusterRun, xactsBefore int64) (float64, bool, error) {
	b := c.b
	fx := c.spread(c.intake)
	rates := b.cfg.ClusterRates
	if err := c.tr.Reset(ctx); err != nil { // the burn-down's arrivals
		return 0, false, err
	}
	debitsBefore, err := c.p.count(`SELECT COUNT(*) FROM ledger_entries WHERE reason = 'REQUEST_ACCEPTED'`)
	if err != nil {
		return 0, false, err
	}
	c.measure()
	var steps []clusterStep
	var accepted, firstXacts int64
	ceiling := 0.0
	refined := false
	for len(rates) > 0 {
		rate := rates[0]
		rates = rates[1:]
		st, err := c.step(ctx, rate, fx)
		if err != nil {
			return 0, false, err
		}
		accepted += int64(st.answered202)
		steps = append(steps, st)
		// The first rate, every size's, is the one whose transactions are counted: the wait for them to be
		// published would stretch every step.
		if len(steps) == 1 {
			x, err := c.xacts(ctx, true)
			if err != nil {
				return 0, false, err
			}
			firstXacts = x - xactsBefore
			b.logf("cluster: %d processes @ %.0f/s: %s", n, rate, transactionsPer(firstXacts, accepted, "request"))
		}
		b.logf("cluster: %d processes @ %.0f/s: %s; %s", n, rate, st, st.cost.Format())
		if st.sustained {
			ceiling = max(ceiling, rate)
			continue
		}
		if refined {
			break
		}
		refined = true
		rates = []float64{(ceiling + rate) / 2}
	}
	rss := c.peakRSS()
	var void []error
	servers := make([]int64, len(c.intake.Servers))
	for i, s := range c.intake.Servers {
		servers[i] = s.ID
	}
	stored, err := c.p.count(`SELECT COUNT(*) FROM requests WHERE server_id = ANY($1)`, pq.Array(servers))
	if err != nil {
		return 0, false, err
	}
	debits, err := c.p.count(`SELECT COUNT(*) FROM ledger_entries WHERE reason = 'REQUEST_ACCEPTED'`)
	if err != nil {
		return 0, false, err
	}
	debits -= debitsBefore
	ledger := fmt.Sprintf("ledger: %d answered 202, %d stored, %d debits", accepted, stored, debits)
	if stored != accepted || debits != accepted {
		void = append(void, errors.New(ledger))
	}
	if !c.paused {
		got, err := c.tr.awaitReceived(ctx, accepted, time.Minute)
		if err != nil {
			return 0, false, err
		}
		arrivals, err := c.tr.Arrivals(ctx)
		if err != nil {
			return 0, false, err
		}
		rep := repeatsOf(arrivals)
		ledger += fmt.Sprintf("; %d received, %s", got, rep)
		if got < accepted {
			void = append(void, fmt.Errorf("%d of %d accepted requests received", got, accepted))
		}
		if rep.sameAttempt+rep.redelivered > 0 {
			void = append(void, errors.New(rep.String()))
		}
	}
	var detail strings.Builder
	detail.WriteString("steps, offered → accepted: ")
	for i, st := range steps {
		if i > 0 {
			detail.WriteString(", ")
		}
		detail.WriteString(st.String())
	}
	fmt.Fprintf(&detail, "; cost§ at the first rate, %.0f/s (transactions from the step's start)", steps[0].rate)
	if top := slices.IndexFunc(steps, func(s clusterStep) bool { return s.sustained && s.rate == ceiling }); top > 0 {
		fmt.Fprintf(&detail, "; at the ceiling, %.0f/s: %s", steps[top].rate, steps[top].cost.Format())
	}
	fmt.Fprintf(&detail, "; %s", ledger)
	figure := "no rate sustained"
	atLeast := ceiling > 0 && !refined // every rate offered was sustained: the processes may take more
	if ceiling > 0 {
		bound := ""
		if atLeast {
			bound = "≥ "
			b.logf("cluster: %d processes sustained the highest rate offered; the ceiling is at least %.0f/s (offer more with -cluster-rates)",
				n, ceiling)
		}
		baseAtLeast := base != nil && base.atLeast
		ratioBound := ""
		switch {
		case baseAtLeast && !atLeast:
			ratioBound = "≤ "
		case atLeast && !baseAtLeast:
			ratioBound = "≥ "
		}
		ratio := scaling(ceiling, base, func(r clusterRun) float64 { return r.ceiling }, ratioBound)
		if baseAtLeast && atLeast { // two lower bounds: no ratio can be read
			ratio = ""
		}
		figure = fmt.Sprintf("ceiling %s%.0f req/s%s", bound, ceiling, ratio)
	}
	mode := "paused (pure intake)"
	if !c.paused {
		mode = "active → loopback receiver (delivery runs alongside)"
	}
	row := Row{
		Scenario: fmt.Sprintf("cluster n=%d intake", n),
		Figure:   figure,
		Detail:   detail.String(),
		Cost:     steps[0].cost.withTransactions(firstXacts, int64(steps[0].answered202)),
		Settings: fmt.Sprintf("%d cmd/server process(es) on one database; 100 tenants × 1 server × 1 recipient, %s; open model for %v per step, round robin over every process's inbound URLs, ≤ 512 client connections, 1 KiB bodies; rates tried in turn up to the first not sustained, then once halfway back; sustained: every request answered 202 and ≥ %.0f%% of the offered rate accepted; WAL and CPU over each step from a fifth of it to its end, transactions at the first rate; %s%s",
			n, mode, b.cfg.Duration, sustainedShare*100, costNote, b.committersSetting()),
		PeakRSS: rss,
	}
	if err := errors.Join(void...); err != nil {
		row.Void = err.Error()
	}
	b.add(row)
	return ceiling, atLeast, nil
}

// step offers rate for Duration and reads the costs from a fifth of the way in to the end of the schedule.
func (c *cluster) step(ctx context.Context, rate float64, fx *Fixture) (clusterStep, error) {
	d := c.b.cfg.Duration
	type ran struct {
		res LoadResult
		err error
	}
	done := make(chan ran, 1)
	start := time.Now()
	go func() {
		res, err := c.tr.Run(ctx, Load{Rate: rate, Duration: d, Targets: fx.Inbound(), Body: body1K()})
		done <- ran{res, err}
	}()
	from, errFrom := c.sampleAt(ctx, start.Add(d/5))
	to, errTo := c.sampleAt(ctx, start.Add(d))
	r := <-done
	if err := errors.Join(r.err, errFrom, errTo); err != nil {
		return clusterStep{}, err
	}
	res := r.res
	st := clusterStep{
		rate: rate, accepted: res.AcceptedPerSecond(), answered202: res.Accepted(), others: res.Others(), failed: res.Failed(),
		p99:  Percentile(res.Latencies(time.Time{}, time.Time{}), 0.99),
		cost: costBetween(from, to, res.acceptedBetween(from.at, to.at), "request"),
	}
	st.sustained = st.others == 0 && st.failed == 0 && st.accepted >= sustainedShare*rate
	return st, nil
}

// killRate is the kill run's offered rate, and what it is: half the ceiling two processes sustained (as latency
// runs at half the ingest ceiling), else half the highest ceiling measured, else half the first rate.
func killRate(runs []clusterRun, rates []float64) (float64, string) {
	best := 0.0
	for _, r := range runs {
		if r.n == 2 && r.ceiling > 0 {
			return r.ceiling / 2, "half the 2-process ceiling"
		}
		best = max(best, r.ceiling)
	}
	if best > 0 {
		return best / 2, "half the highest ceiling measured"
	}
	return rates[0] / 2, "half the first rate: no ceiling measured"
}

// kill runs two processes under load at rate, kills the second with SIGKILL halfway through, and checks, once
// no delivery is open any more, that nothing answered 202 was lost: every such request stored, its deliveries
// all SUCCEEDED, and received. The survivor's rescuer records the killed process's claims as INTERRUPTED
// attempts once their leases lapse and they are attempted again: an attempt the killed process had sent but not
// recorded is received again under the next attempt number, a redelivery, reported apart from duplicates (an
// attempt received twice), of which there must be none.
func (c *cluster) kill(ctx context.Context, rate float64, why string) error {
	b := c.b
	if err := c.reset(ctx); err != nil {
		return err
	}
	defer c.stop()
	if err := c.start(ctx, 2, "ADAL_LEASE="+killLease.String(), "ADAL_RESCUE_INTERVAL="+killRescueInterval.String(),
		"ADAL_RETRY_UNIT="+killRetryUnit.String()); err != nil {
		return err
	}
	fx := c.spread(c.victims)
	victim := c.procs[1]
	d := b.cfg.Duration
	c.measure()
	type ran struct {
		res LoadResult
		err error
	}
	done := make(chan ran, 1)
	start := time.Now()
	go func() {
		res, err := c.tr.Run(ctx, Load{Rate: rate, Duration: d, Targets: fx.Inbound(), Body: body1K(), KeepIDs: true})
		done <- ran{res, err}
	}()
	select {
	case <-ctx.Done():
	case <-time.After(d / 2):
	}
	killedAt := time.Since(start)
	errKill := victim.kill()
	r := <-done
	if err := errors.Join(errKill, r.err); err != nil {
		return err
	}
	b.logf("cluster: killed server 2 of 2 %v into the load; waiting for every delivery to succeed", killedAt.Round(time.Millisecond))
	loadEnd := time.Now()
	const settleWithin = 2 * time.Minute
	var open int64
	for {
		var err error
		if open, err = c.p.count(`SELECT COUNT(*) FROM deliveries WHERE status <> 'SUCCEEDED'`); err != nil {
			return err
		}
		if open == 0 || time.Since(loadEnd) > settleWithin {
			break
		}
		if err := c.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	settled := time.Since(loadEnd)
	rss := c.peakRSS()
	res := r.res
	published := res.published()
	ids := make([]int64, 0, len(published))
	for id := range published {
		ids = append(ids, id)
	}
	stored, err := c.idSet(ctx, `SELECT id FROM requests WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	succeeded, err := c.idSet(ctx, `SELECT request_id FROM deliveries WHERE request_id = ANY($1)
		GROUP BY request_id HAVING bool_and(status = 'SUCCEEDED')`, ids)
	if err != nil {
		return err
	}
	interrupted, err := c.p.count(`SELECT COUNT(*) FROM attempts WHERE error_kind = 'INTERRUPTED'`)
	if err != nil {
		return err
	}
	arrivals, err := c.tr.Arrivals(ctx)
	if err != nil {
		return err
	}
	m := matchArrivals(published, arrivals)
	rep := repeatsOf(arrivals)
	var lost, notStored, notSucceeded, notReceived int
	for id := range published {
		_, received := m.first[id]
		switch {
		case !stored[id]:
			notStored++
		case !succeeded[id]:
			notSucceeded++
		case !received:
			notReceived++
		default:
			continue
		}
		lost++
	}
	settledNote := fmt.Sprintf("every delivery SUCCEEDED %.1f s after the load ended", settled.Seconds())
	if open > 0 {
		settledNote = fmt.Sprintf("%d deliveries still not SUCCEEDED %v after the load ended", open, settleWithin)
	}
	row := Row{
		Scenario: "cluster kill -9",
		Figure:   fmt.Sprintf("lost %d of %d answered 202", lost, len(published)),
		Detail: fmt.Sprintf("server 2 of 2 killed (SIGKILL) %.1f s into the load; %s; lost: not stored %d, deliveries not all SUCCEEDED %d, never received %d; "+
			"duplicates (an attempt received twice) %d; at-least-once redeliveries (received again under a later attempt: in flight at the kill) %d; "+
			"INTERRUPTED attempts recorded by the survivor's rescuer %d; unanswered %d (sent to the killed process), non-202 %d; "+
			"arrivals of requests never answered 202 (stored, the answer lost in the kill) %d",
			killedAt.Seconds(), settledNote, notStored, notSucceeded, notReceived, rep.sameAttempt, rep.redelivered, interrupted,
			res.Failed(), res.Others(), m.unknown),
		Target: fmt.Sprintf("nothing lost, no attempt received twice: %s", met(lost == 0 && rep.sameAttempt == 0)),
		Settings: fmt.Sprintf("2 cmd/server processes on one database; 10 tenants × 1 recipient → receiver answering 200; open model %.0f/s (%s) for %v, round robin over both processes' inbound URLs, 1 KiB bodies; ADAL_LEASE %v, ADAL_RESCUE_INTERVAL %v, ADAL_RETRY_UNIT %v",
			rate, why, d, killLease, killRescueInterval, killRetryUnit),
		PeakRSS: rss,
	}
	var void []string
	if lost > 0 {
		void = append(void, fmt.Sprintf("%d requests answered 202 lost", lost))
	}
	if rep.sameAttempt > 0 {
		void = append(void, fmt.Sprintf("%d attempts received twice", rep.sameAttempt))
	}
	row.Void = strings.Join(void, "; ")
	b.add(row)
	return nil
}

// idSet runs a query of IDs over ids and returns those it found.
func (c *cluster) idSet(ctx context.Context, query string, ids []int64) (map[int64]bool, error) {
	rows, err := c.p.DB.QueryContext(ctx, query, pq.Array(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}
