package leader_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// Short intervals: a takeover must happen within a few of them.
const (
	retryInterval = 50 * time.Millisecond
	pingInterval  = 50 * time.Millisecond
	deadline      = 10 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// changes records OnChange calls.
type changes struct {
	mu  sync.Mutex
	got []bool
}

func (c *changes) record(leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, leader)
}

func (c *changes) list() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.got...)
}

type testBundle struct {
	db *dbtest.DB
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{db: dbtest.Open(t)}
}

// process opens a second connection pool to the test database, as another server process would.
func (b *testBundle) process(t *testing.T) *storage.DB {
	t.Helper()
	if b.db.URL == "" {
		return b.db.DB
	}
	db, err := storage.Open(t.Context(), b.db.URL, "")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func startElector(t *testing.T, db *storage.DB, key int64, ch *changes) *leader.Elector {
	t.Helper()
	cfg := leader.Config{DB: db, Key: key, RetryInterval: retryInterval, PingInterval: pingInterval, Logger: quiet}
	if ch != nil {
		cfg.OnChange = ch.record
	}
	e, err := leader.New(cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start(t.Context()))
	t.Cleanup(e.Stop)
	return e
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, deadline, 5*time.Millisecond, what)
}

func randomKey() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) | 1) // never zero, which would mean "derive"
}

func TestConfigValidated(t *testing.T) {
	t.Parallel()
	_, err := leader.New(leader.Config{})
	require.ErrorContains(t, err, "DB is required")
	_, err = leader.New(leader.Config{DB: &storage.DB{}, RetryInterval: -time.Second})
	require.ErrorContains(t, err, "RetryInterval")
}

func TestSingleProcessLeadsUntilStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ch changes
	e := startElector(t, b.db.DB, 0, &ch)

	eventually(t, "the only process leads", e.IsLeader)
	e.Stop()
	require.False(t, e.IsLeader())
	require.Equal(t, []bool{true, false}, ch.list())
	e.Stop() // a second Stop is harmless
}

func TestExactlyOneLeaderAndTakeoverOnStop(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	b := setup(t)
	var chA, chB changes
	a := startElector(t, b.process(t), 0, &chA)
	bb := startElector(t, b.process(t), 0, &chB)

	eventually(t, "a leader", func() bool { return a.IsLeader() || bb.IsLeader() })
	leader, follower, followerCh := a, bb, &chB
	if bb.IsLeader() {
		leader, follower, followerCh = bb, a, &chA
	}
	// The follower keeps retrying and keeps failing: over many retry intervals it never leads.
	for range 10 {
		require.False(t, follower.IsLeader(), "two leaders")
		require.True(t, leader.IsLeader())
		time.Sleep(retryInterval) // observing that nothing changes, not waiting for a change
	}

	leader.Stop()
	require.False(t, leader.IsLeader())
	eventually(t, "the follower takes over", follower.IsLeader)
	// OnChange runs just after the state flips; wait for it rather than race it.
	eventually(t, "the follower hears it", func() bool { return len(followerCh.list()) > 0 })
	require.Equal(t, []bool{true}, followerCh.list())
}

func TestTakeoverWhenLeaderConnectionDies(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	b := setup(t)
	key := randomKey()
	var chA, chB changes
	a := startElector(t, b.process(t), key, &chA)
	bb := startElector(t, b.process(t), key, &chB)
	eventually(t, "a leader", func() bool { return a.IsLeader() || bb.IsLeader() })
	oldCh := &chA
	if bb.IsLeader() {
		oldCh = &chB
	}

	// Kill the session holding the lock, as a crashed process or a dropped network connection would.
	var pid int
	require.NoError(t, b.db.SQL.QueryRowContext(t.Context(), `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND classid::bigint = $1 AND objid::bigint = $2`,
		int64(uint64(key)>>32), int64(uint64(key)&0xffffffff)).Scan(&pid))
	var killed bool
	require.NoError(t, b.db.SQL.QueryRowContext(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)

	// The old leader notices at its next ping; then one of the two (either may win the race) leads again.
	eventually(t, "the old leader steps down", func() bool {
		l := oldCh.list()
		return len(l) >= 2 && !l[1]
	})
	eventually(t, "a new leader", func() bool { return a.IsLeader() || bb.IsLeader() })
	require.False(t, a.IsLeader() && bb.IsLeader(), "two leaders")
}

func TestCronRunsOnlyOnLeader(t *testing.T) {
	t.Parallel()
	var status toggle
	var runs atomic.Int64
	c, err := leader.NewCron(leader.CronConfig{
		Name:   "test",
		Spec:   "@every 1s",
		Leader: &status,
		Run: func(context.Context) error {
			runs.Add(1)
			return nil
		},
		Logger: quiet,
	})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)

	status.set(true)
	eventually(t, "a run on the leader", func() bool { return runs.Load() > 0 })
	status.set(false)
	// Absence takes time to observe: let a tick that saw the old state finish, then watch two more ticks.
	time.Sleep(1100 * time.Millisecond)
	n := runs.Load()
	time.Sleep(2100 * time.Millisecond)
	require.Equal(t, n, runs.Load(), "the job ran on a follower")
	c.Stop()
}

func TestCronConfigValidated(t *testing.T) {
	t.Parallel()
	run := func(context.Context) error { return nil }
	_, err := leader.NewCron(leader.CronConfig{Name: "x", Spec: "every now and then", Leader: leader.Always{}, Run: run})
	require.ErrorContains(t, err, "cron spec")
	_, err = leader.NewCron(leader.CronConfig{Name: "x", Spec: "@every 5m", Run: run})
	require.ErrorContains(t, err, "Leader is required")
}

type toggle struct {
	mu sync.Mutex
	on bool
}

func (s *toggle) set(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = on
}

func (s *toggle) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.on
}

// TestTakeoverWhenLeaderProcessDies runs the leader in a separate process and kills it: the kernel closes its
// connection, Postgres ends the session and frees the lock, and the survivor takes over.
func TestTakeoverWhenLeaderProcessDies(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	b := setup(t)
	key := randomKey()

	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderHelperProcess$")
	cmd.Env = append(os.Environ(), helperURL+"="+b.db.URL, helperKey+"="+strconv.FormatInt(key, 10))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	led := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "leader true" {
				close(led)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-led:
	case <-time.After(deadline):
		t.Fatal("the helper process never led")
	}

	survivor := startElector(t, b.process(t), key, nil)
	for range 5 {
		require.False(t, survivor.IsLeader(), "two leaders")
		time.Sleep(retryInterval) // observing that nothing changes, not waiting for a change
	}
	require.NoError(t, cmd.Process.Kill())
	eventually(t, "the survivor takes over from the killed process", survivor.IsLeader)
}

const (
	helperURL = "ADAL_LEADER_HELPER_URL"
	helperKey = "ADAL_LEADER_HELPER_KEY"
)

// TestLeaderHelperProcess is the other process of TestTakeoverWhenLeaderProcessDies; it only runs there.
func TestLeaderHelperProcess(t *testing.T) {
	url := os.Getenv(helperURL)
	if url == "" {
		t.Skip("helper process of TestTakeoverWhenLeaderProcessDies")
	}
	key, err := strconv.ParseInt(os.Getenv(helperKey), 10, 64)
	require.NoError(t, err)
	db, err := storage.Open(context.Background(), url, "")
	require.NoError(t, err)
	e, err := leader.New(leader.Config{DB: db, Key: key, RetryInterval: retryInterval, PingInterval: pingInterval,
		Logger: quiet, OnChange: func(l bool) { fmt.Printf("leader %v\n", l) }})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	select {} // until killed
}
