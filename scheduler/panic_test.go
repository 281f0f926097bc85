package scheduler_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// panickingSender panics on the first attempt of every delivery or job it is given, and sends the others
// through the HTTP sender.
type panickingSender struct {
	http     *delivery.HTTPSender
	panicked atomic.Int32
}

func (s *panickingSender) Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome {
	if out.Attempt == 1 {
		s.panicked.Add(1)
		panic("sender bug on " + out.URL)
	}
	return s.http.Send(ctx, out)
}

// An attempt whose sender panics does not end the process: the attempt is recorded INTERRUPTED at once (the
// rescuer's outcome for a crash), its worker and its capped recipient's slot come back, the retry delivers
// it, and the process goes on serving intake, outbound jobs and the API.
func TestPanickingAttemptIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	sender := &panickingSender{http: delivery.NewHTTPSender(egress.Policy{AllowPrivate: true}, 4, nil)}
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.Workers = 4
		c.Sender = sender
	})
	tn, srv := env.NewTenantServer(100)
	rcv := newReceiver(t, 0)
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL,
		"retrySchedule": "STEPPED", "maxConcurrency": 1})

	var ids []string
	for i := range 3 {
		ids = append(ids, env.Send(srv.Key, "", `{"n":`+strconv.Itoa(i)+`}`))
	}
	for _, id := range ids {
		d := waitDelivered(t, env, id, 20*time.Second, "the retry of request "+id)
		require.Len(t, d.Edges.Attempts, 2)
		first := d.Edges.Attempts[0]
		require.Equal(t, attempt.ErrorKindINTERRUPTED, *first.ErrorKind)
		require.Contains(t, first.ErrorMessage, "panicked")
		require.Equal(t, attempt.StatusSUCCEEDED, d.Edges.Attempts[1].Status)
	}
	require.EqualValues(t, 3, sender.panicked.Load())
	require.Equal(t, 3, rcv.count(), "each request reached the recipient once, by its retry")
	ctx := viewer.SystemContext(t.Context())
	n, err := strconv.Atoi(rid)
	require.NoError(t, err)
	r, err := env.DB.Client.Recipient.Get(ctx, n)
	require.NoError(t, err)
	require.Zero(t, r.InFlight, "the panicked attempts gave their slots back")

	// The outbound lane survives the same way, and the process still takes requests and delivers them.
	job := send(t, env, tn, map[string]any{"url": rcv.URL + "/job"})
	if j := waitFinished(t, env, job); j.Status != outboundjob.StatusSUCCEEDED || j.AttemptCount != 2 {
		t.Fatalf("outbound job %d is %s after %d attempts, want SUCCEEDED after 2", job, j.Status, j.AttemptCount)
	}
	last := env.Send(srv.Key, "", `{"after":true}`)
	waitDelivered(t, env, last, 20*time.Second, "a request accepted after the panics")
}
