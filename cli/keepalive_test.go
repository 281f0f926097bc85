package cli

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/internal/flakynet"
	"github.com/adal-relay/adal/relay/relaytest"
)

// fakeClocks are a wall clock and a monotonic clock that the test moves by hand.
type fakeClocks struct{ wall, mono atomic.Int64 }

func (c *fakeClocks) wallNow() time.Time      { return time.Unix(0, c.wall.Load()) }
func (c *fakeClocks) monoNow() time.Duration  { return time.Duration(c.mono.Load()) }
func (c *fakeClocks) run(d time.Duration)     { c.wall.Add(int64(d)); c.mono.Add(int64(d)) }
func (c *fakeClocks) sleep(d time.Duration)   { c.wall.Add(int64(d)) }
func (c *fakeClocks) setBack(d time.Duration) { c.wall.Add(-int64(d)) }
func newFakeClocks() *fakeClocks {
	c := &fakeClocks{}
	c.wall.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func TestWakeDetectorTellsASleepFromTimePassing(t *testing.T) {
	t.Parallel()
	c := newFakeClocks()
	d := newWakeDetector(c.wallNow, c.monoNow)
	c.run(time.Second)
	require.Zero(t, d.check(), "time passing awake is no sleep")
	c.run(time.Second)
	c.sleep(time.Second)
	require.Zero(t, d.check(), "a hiccup below the threshold is no sleep")
	c.run(time.Second)
	c.sleep(10 * time.Minute)
	require.Equal(t, 10*time.Minute, d.check())
	c.run(time.Second)
	require.Zero(t, d.check(), "told once")
	c.setBack(time.Hour)
	require.Zero(t, d.check(), "a wall clock set back is no sleep")
}

// After a sleep the connection is checked at once: one that died meanwhile is closed within the ping's
// wait, long before the next regular ping would have found it.
func TestKeepAliveClosesAConnectionThatDiedInASleep(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	net := flakynet.New(t, env.Server.URL)
	c := newFakeClocks()
	woke := make(chan time.Duration, 1)
	ka := keepAlive{every: time.Hour, pongWait: 500 * time.Millisecond, wakeTick: 10 * time.Millisecond,
		wall: c.wallNow, mono: c.monoNow, onWake: func(d time.Duration) { woke <- d }}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, err := dialWS(ctx, net.URL(), tn.Member, ka)
	require.NoError(t, err)
	defer ws.Close()

	net.Freeze()
	c.sleep(5 * time.Minute)
	select {
	case d := <-woke:
		require.Equal(t, 5*time.Minute, d)
	case <-ctx.Done():
		t.Fatal("the sleep was not noticed")
	}
	select {
	case <-ws.Done():
	case <-ctx.Done():
		t.Fatal("the dead connection was not closed")
	}
	require.ErrorContains(t, ws.Err(), "no answer from the server after the computer slept for about 5m0s")
}
