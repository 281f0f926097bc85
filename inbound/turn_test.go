package inbound

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// turnBundle is a batcher of two committers whose batches go to a stand-in that holds each commit until the
// test releases it, and records how many were in flight at once, what each held, and the most batches of one
// partition in flight at once.
type turnBundle struct {
	b       *batcher
	keys    [2]string // a server key of each partition
	mu      sync.Mutex
	flying  int
	most    int
	sizes   []int
	byPart  [2]int
	mostOne int // the most batches holding requests of one partition in flight at once
	release chan struct{}
}

func setupTurn(t *testing.T, maxBatch int) *turnBundle {
	t.Helper()
	tb := &turnBundle{release: make(chan struct{})}
	tb.b = &batcher{maxBatch: maxBatch, crowd: crowdOf(maxBatch)}
	tb.b.commitBatch = func(batch []*pendingAccept) {
		parts := map[int]bool{}
		for _, p := range batch {
			parts[tb.b.partitionOf(p.key)] = true
		}
		tb.mu.Lock()
		tb.flying++
		tb.most = max(tb.most, tb.flying)
		tb.sizes = append(tb.sizes, len(batch))
		for p := range parts {
			tb.byPart[p]++
			tb.mostOne = max(tb.mostOne, tb.byPart[p])
		}
		tb.mu.Unlock()
		<-tb.release
		tb.mu.Lock()
		tb.flying--
		for p := range parts {
			tb.byPart[p]--
		}
		tb.mu.Unlock()
		for _, p := range batch {
			p.done <- acceptResult{}
		}
	}
	tb.b.start(2)
	t.Cleanup(func() {
		close(tb.release) // lets any commit still held finish
		tb.b.close()
	})
	for i, found := 0, 0; found < 2; i++ {
		key := "server-" + strconv.Itoa(i)
		if p := tb.b.partitionOf(key); tb.keys[p] == "" {
			tb.keys[p] = key
			found++
		}
	}
	return tb
}

// send queues n accepts for partition p together, as n submits arriving during one commit would, without
// waiting for their answers: a committer free meanwhile cannot take the first before the rest arrive.
func (tb *turnBundle) send(t *testing.T, p, n int) []*pendingAccept {
	t.Helper()
	sent := make([]*pendingAccept, n)
	for i := range sent {
		sent[i] = &pendingAccept{ctx: context.Background(), key: tb.keys[p], done: make(chan acceptResult, 1)}
	}
	require.NoError(t, tb.b.enqueue(sent...))
	return sent
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

func (tb *turnBundle) batches(n int) func() bool {
	return func() bool { _, _, s := tb.state(); return len(s) == n }
}

func (tb *turnBundle) idle() bool { f, _, _ := tb.state(); return f == 0 }

// finish releases the n commits held, waits for them to finish, and returns the most batches that were in
// flight at once and what each batch held.
func (tb *turnBundle) finish(t *testing.T, n int) (most int, sizes []int) {
	t.Helper()
	for range n {
		tb.release <- struct{}{}
	}
	tb.waitFor(t, "the batches in flight to finish", tb.idle)
	_, most, sizes = tb.state()
	return most, sizes
}

// TestTurnBatchTakesEveryPartition: while one batch commits, what arrives for both partitions, short of the
// crowd, waits, and is then committed in one batch, alone: a request waits for the batch in flight, not for
// one batch per partition.
func TestTurnBatchTakesEveryPartition(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 256)
	tb.send(t, 0, 1)
	tb.waitFor(t, "the first batch to commit", tb.batches(1))

	tb.send(t, 1, 5)
	tb.send(t, 0, 5)
	tb.release <- struct{}{} // the first batch is done
	tb.waitFor(t, "the second batch to commit", tb.batches(2))
	most, sizes := tb.finish(t, 1)
	require.Equal(t, 1, most, "two batches were in flight at once")
	require.Equal(t, []int{1, 10}, sizes)
}

// TestTurnBatchUnderLoadTakesOnePartition: once as many requests as the crowd are queued, the turn's batch
// takes one partition's, and leaves the others free to commit beside it once crowded.
func TestTurnBatchUnderLoadTakesOnePartition(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 16) // crowd 4
	tb.send(t, 0, 1)
	tb.waitFor(t, "the first batch to commit", tb.batches(1))

	tb.send(t, 1, 3)
	tb.send(t, 0, 3) // 6 queued in all, neither partition crowded
	tb.release <- struct{}{}
	tb.waitFor(t, "the turn's batch to commit", tb.batches(2))
	tb.send(t, 0, 1) // the partition left out is now crowded
	tb.waitFor(t, "the crowded partition to commit beside the turn", func() bool { f, _, _ := tb.state(); return f == 2 })
	most, sizes := tb.finish(t, 2)
	require.Equal(t, 2, most)
	require.Equal(t, []int{1, 3, 4}, sizes)
}

// TestCrowdedPartitionCommitsBesideTheTurn: a partition whose queue reaches the crowd while another's batch
// commits does not wait for it: it commits beside it rather than let its requests queue behind it.
func TestCrowdedPartitionCommitsBesideTheTurn(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 16) // crowd 4
	require.Equal(t, 4, tb.b.crowd)
	tb.send(t, 0, 1)
	tb.waitFor(t, "the first batch to commit", tb.batches(1))

	tb.send(t, 1, tb.b.crowd)
	tb.waitFor(t, "the crowded batch to commit beside the first", func() bool { f, _, _ := tb.state(); return f == 2 })
	most, sizes := tb.finish(t, 2)
	require.Equal(t, 2, most)
	require.Equal(t, []int{1, tb.b.crowd}, sizes)
}

// TestCrowdedPartitionNeverHasTwoBatchesInFlight: a partition crowded again while its crowded batch commits
// waits for that batch, even while another crowded partition commits beside it.
func TestCrowdedPartitionNeverHasTwoBatchesInFlight(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 16) // crowd 4
	tb.send(t, 0, tb.b.crowd)
	tb.waitFor(t, "the crowded batch to commit", tb.batches(1))

	tb.send(t, 0, tb.b.crowd) // crowded again, but its crowded batch is in flight
	tb.send(t, 1, tb.b.crowd) // crowded, and free to commit beside it
	tb.waitFor(t, "the other crowded partition to commit beside the first", tb.batches(2))
	most, sizes := tb.finish(t, 3)
	tb.mu.Lock()
	mostOne := tb.mostOne
	tb.mu.Unlock()
	require.Equal(t, 1, mostOne, "a partition had two batches in flight at once")
	require.Equal(t, 2, most)
	require.Equal(t, []int{tb.b.crowd, tb.b.crowd, tb.b.crowd}, sizes)
}

// TestCloseAnswersWhatIsQueued: at shutdown the batch in flight still commits, what is queued is answered
// errStopped, and nothing more is taken.
func TestCloseAnswersWhatIsQueued(t *testing.T) {
	t.Parallel()
	tb := setupTurn(t, 256)
	flying := tb.send(t, 0, 1)
	tb.waitFor(t, "the first batch to commit", tb.batches(1))
	queued := tb.send(t, 1, 3)

	closed := make(chan struct{})
	go func() { tb.b.close(); close(closed) }()
	tb.waitFor(t, "intake to stop taking requests", func() bool {
		return tb.b.enqueue(&pendingAccept{key: tb.keys[0], done: make(chan acceptResult, 1)}) != nil
	})
	tb.release <- struct{}{}
	<-closed

	require.NoError(t, (<-flying[0].done).err, "the batch in flight was not committed")
	for _, p := range queued {
		require.ErrorIs(t, (<-p.done).err, errStopped)
	}
	_, _, sizes := tb.state()
	require.Equal(t, []int{1}, sizes, "a batch was taken after shutdown began")
}
