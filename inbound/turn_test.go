package inbound

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// turnBundle is a batcher of two committers whose batches go to a stand-in that holds each commit until the
// test releases it, and records how many were in flight at once and what each held.
type turnBundle struct {
	b       *batcher
	keys    [2]string // a server key for each committer's queue
	mu      sync.Mutex
	flying  int
	most    int
	sizes   []int
	release chan struct{}
}

func setupTurn(t *testing.T, maxBatch int) *turnBundle {
	t.Helper()
	tb := &turnBundle{release: make(chan struct{})}
	tb.b = &batcher{maxBatch: maxBatch, crowd: crowdOf(maxBatch)}
	tb.b.commitBatch = func(batch []*pendingAccept) {
		tb.mu.Lock()
		tb.flying++
		tb.most = max(tb.most, tb.flying)
		tb.sizes = append(tb.sizes, len(batch))
		tb.mu.Unlock()
		<-tb.release
		tb.mu.Lock()
		tb.flying--
		tb.mu.Unlock()
	}
	tb.b.start(2)
	t.Cleanup(func() {
		close(tb.release) // lets any commit still held finish
		tb.b.close()
	})
	for i, found := 0, 0; found < 2; i++ {
		key := "server-" + strconv.Itoa(i)
		for q := range tb.keys {
			if tb.keys[q] == "" && tb.b.queueFor(key) == tb.b.queues[q] {
				tb.keys[q] = key
				found++
			}
		}
	}
	return tb
}

// send queues n accepts for the committer of queue q, as submit would, without waiting for their answers.
func (tb *turnBundle) send(q, n int) {
	for range n {
		tb.b.queues[q] <- &pendingAccept{key: tb.keys[q]}
	}
}

// waitFor polls cond until it holds, or fails the test after a deadline.
func (tb *turnBundle) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a state, not waiting for time to pass
	}
}

func (tb *turnBundle) state() (flying, most int, sizes []int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.flying, tb.most, append([]int(nil), tb.sizes...)
}

// TestSmallBatchWaitsForTheTurn: while one batch commits, a small batch of another committer does not commit
// beside it; it gathers what arrives meanwhile and commits all of it, alone, once the first is done.
func TestSmallBatchWaitsForTheTurn(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 256)
	tb.send(0, 1)
	tb.waitFor(t, "the first batch to commit", func() bool { f, _, _ := tb.state(); return f == 1 })

	tb.send(1, 5)
	tb.waitFor(t, "the second committer to take its queue", func() bool { return len(tb.b.queues[1]) == 0 })
	tb.send(1, 5) // arrives while the second committer waits for the turn
	tb.waitFor(t, "the second committer to gather the rest", func() bool { return len(tb.b.queues[1]) == 0 })

	tb.release <- struct{}{} // the first batch is done
	tb.waitFor(t, "the second batch to commit", func() bool { _, _, s := tb.state(); return len(s) == 2 })
	tb.release <- struct{}{}
	tb.waitFor(t, "the second batch to finish", func() bool { f, _, _ := tb.state(); return f == 0 })

	_, most, sizes := tb.state()
	require.Equal(t, 1, most, "two small batches were in flight at once")
	require.Equal(t, []int{1, 10}, sizes)
}

// TestCrowdedBatchCommitsBesideTheTurn: once the waiting committer's batch reaches the crowd, it commits beside
// the one in flight rather than let its requests queue behind it.
func TestCrowdedBatchCommitsBesideTheTurn(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 16) // crowd 4
	require.Equal(t, 4, tb.b.crowd)
	tb.send(0, 1)
	tb.waitFor(t, "the first batch to commit", func() bool { f, _, _ := tb.state(); return f == 1 })

	tb.send(1, tb.b.crowd)
	tb.waitFor(t, "the crowded batch to commit beside the first", func() bool { f, _, _ := tb.state(); return f == 2 })
	tb.release <- struct{}{}
	tb.release <- struct{}{}
	tb.waitFor(t, "both batches to finish", func() bool { f, _, _ := tb.state(); return f == 0 })

	_, most, sizes := tb.state()
	require.Equal(t, 2, most)
	require.Equal(t, []int{1, tb.b.crowd}, sizes)
}
