package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
)

// TestExponentialTwelveAttempts runs a whole EXPONENTIAL schedule through the engine on a compressed unit: a
// recipient that always fails gets 12 attempts, retry k starting no earlier than ((2^k)−1)·84.8 s (in units
// of a minute) after the first attempt, and then the delivery fails. The delivery keeps the maximum it was
// created with when the recipient is changed meanwhile.
func TestExponentialTwelveAttempts(t *testing.T) {
	t.Parallel()
	const unit = time.Millisecond // the whole schedule: 2047·84.8 s/60 s·1 ms ≈ 2.9 s
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(unit))
	rcv := newReceiver(t, 1000)
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL,
		"retrySchedule": "EXPONENTIAL", "maxAttempts": 12})

	reqID := env.Send(srv.Key, "", `{}`)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {maxAttempts: 3, retrySchedule: STEPPED}){ id } }`,
		map[string]any{"id": id}, nil)

	d := waitFailed(t, env, reqID, 60*time.Second, "all 12 attempts to fail")
	require.Equal(t, 12, d.MaxAttempts, "the delivery keeps the maximum it was created with")
	require.Equal(t, entdelivery.RetryScheduleEXPONENTIAL, d.RetrySchedule)
	require.Equal(t, 12, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 12)
	require.Equal(t, 12, rcv.count())
	require.NotNil(t, d.FirstAttemptAt)
	first := *d.FirstAttemptAt
	for k := 1; k <= 11; k++ {
		a := d.Edges.Attempts[k]
		require.Equal(t, k+1, a.Number)
		// 84.8 s per minute of schedule is 84.8/60 units; in nanoseconds of this unit, exact to the nanosecond.
		due := first.Add(time.Duration(((1 << k) - 1) * 848 * int64(unit) / 600))
		require.False(t, a.StartedAt.Before(due), "retry %d started at %v, due %v", k, a.StartedAt, due)
		require.False(t, a.StartedAt.Before(d.Edges.Attempts[k-1].FinishedAt), "retry %d overlaps the attempt before it", k)
	}
}
