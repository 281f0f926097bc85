package cli

import (
	"fmt"
	"time"
)

// keepAlive is how listen watches its connection.
type keepAlive struct {
	every    time.Duration // between pings
	pongWait time.Duration // how long a ping may go unanswered
	wakeTick time.Duration // how often to look for a sleep
	wall     func() time.Time
	mono     func() time.Duration
	onWake   func(slept time.Duration) // told of a sleep before the connection is checked
}

// Defaults: a dead connection is noticed within every+pongWait, a sleep within wakeTick+pongWait.
const (
	defaultPingEvery = 15 * time.Second
	maxPongWait      = 5 * time.Second
	wakeTick         = time.Second
	// wakeThreshold is how far the wall clock must run ahead of the monotonic clock to count as a sleep:
	// more than a scheduling hiccup, less than any sleep worth noticing.
	wakeThreshold = 2 * time.Second
)

// keepAliveFromEnv is the default keepAlive, with the ping interval from ADAL_KEEPALIVE if set.
func keepAliveFromEnv() (keepAlive, error) {
	every := defaultPingEvery
	if v := getenv(envKeepAlive); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return keepAlive{}, fmt.Errorf("%s=%q is not a positive duration such as 15s", envKeepAlive, v)
		}
		every = d
	}
	start := time.Now()
	return keepAlive{
		every: every, pongWait: min(every, maxPongWait), wakeTick: wakeTick,
		wall: func() time.Time { return time.Now().Round(0) },
		mono: func() time.Duration { return time.Since(start) },
	}, nil
}

// wakeDetector notices that the computer slept: the wall clock moved on while the monotonic clock, which
// stops while the computer sleeps (on Linux and macOS), did not. Timers run on the monotonic clock, so
// without this a connection that died during the sleep would only be noticed at the next regular ping.
type wakeDetector struct {
	wall     func() time.Time
	mono     func() time.Duration
	lastWall time.Time
	lastMono time.Duration
}

func newWakeDetector(wall func() time.Time, mono func() time.Duration) *wakeDetector {
	return &wakeDetector{wall: wall, mono: mono, lastWall: wall(), lastMono: mono()}
}

// check returns how long the computer slept since the last check, or 0. A wall clock set back is no sleep.
func (d *wakeDetector) check() time.Duration {
	w, m := d.wall(), d.mono()
	gap := w.Sub(d.lastWall) - (m - d.lastMono)
	d.lastWall, d.lastMono = w, m
	if gap > wakeThreshold {
		return gap
	}
	return 0
}
