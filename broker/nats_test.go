package broker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
)

// natsAdmin creates the streams a test publishes to, deletes them when the test ends, and reads them.
type natsAdmin struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newNATSAdmin(t *testing.T) *natsAdmin {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("NATS does not answer on %s (%v): start it with JetStream (nats-server -js, or docker run -p 4222:4222 nats -js)", natsAddr, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &natsAdmin{nc: nc, js: js}
}

// stream creates a stream named name that takes one subject, which it returns.
func (a *natsAdmin) stream(t *testing.T, name string) (jetstream.Stream, string) {
	t.Helper()
	subject := name + ".events"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("creating JetStream stream %s: %v (is JetStream on? nats-server -js)", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting JetStream stream %s: %v", name, err)
		}
	})
	return s, subject
}

// newNATSStream creates a stream for t and returns the subject it takes.
func newNATSStream(t *testing.T, name string) string {
	t.Helper()
	_, subject := newNATSAdmin(t).stream(t, name)
	return subject
}

func natsStored(t *testing.T, s jetstream.Stream, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatalf("reading message %d of the stream: %v", seq, err)
	}
	return m
}

func natsMessages(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("reading the stream's state: %v", err)
	}
	return info.State.Msgs
}

// TestNATSPublishStored publishes to a subject a stream takes and checks what the stream stored.
func TestNATSPublishStored(t *testing.T) {
	name := strings.ToUpper(uniqueName("adal"))
	s, subject := newNATSAdmin(t).stream(t, name)
	p := newLoopbackPublisher(t)
	target := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}

	body := []byte(`{"order":42}`)
	o := p.Send(context.Background(), testOutgoing(target, "msg-1", body))
	wantSuccess(t, "publish to JetStream", o)
	if want := fmt.Sprintf("stream %q sequence 1", name); o.Answer != want {
		t.Errorf("answer = %q, want %q", o.Answer, want)
	}

	m := natsStored(t, s, 1)
	if string(m.Data) != string(body) || m.Subject != subject {
		t.Errorf("stored message: subject %q, body %q; want %q, %q", m.Subject, m.Data, subject, body)
	}
	if id := m.Header.Get(jetstream.MsgIDHeader); id != "msg-1" {
		t.Errorf("stored message %s = %q, want msg-1", jetstream.MsgIDHeader, id)
	}
	checkSigned(t, "NATS", m.Header.Get, "msg-1", body)
	if v := m.Header.Values("X-Custom"); !slices.Equal(v, []string{"a", "b"}) {
		t.Errorf("stored message header X-Custom = %q, want both values", v)
	}
}

// TestNATSDuplicate publishes one message id twice, as two attempts of a delivery do: the stream keeps one.
func TestNATSDuplicate(t *testing.T) {
	name := strings.ToUpper(uniqueName("adal"))
	s, subject := newNATSAdmin(t).stream(t, name)
	p := newLoopbackPublisher(t)
	target := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}

	first := p.Send(context.Background(), testOutgoing(target, "same", []byte(`{}`)))
	wantSuccess(t, "first attempt", first)
	second := p.Send(context.Background(), testOutgoing(target, "same", []byte(`{}`)))
	wantSuccess(t, "second attempt", second)
	if want := fmt.Sprintf("stream %q sequence 1 (duplicate: already stored)", name); second.Answer != want {
		t.Errorf("second answer = %q, want %q", second.Answer, want)
	}
	if n := natsMessages(t, s); n != 1 {
		t.Errorf("the stream holds %d messages, want 1", n)
	}
}

// TestNATSNoStream publishes to a subject no stream takes.
func TestNATSNoStream(t *testing.T) {
	newNATSAdmin(t)
	p := newLoopbackPublisher(t)
	subject := uniqueName("adal-nostream") + ".events"
	target := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}
	o := p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
	wantKind(t, "publish to a subject without a stream", o, delivery.ErrBrokerRefused)
	if want := fmt.Sprintf("no JetStream stream takes subject %q", subject); o.ErrorMessage != want {
		t.Errorf("message %q, want %q", o.ErrorMessage, want)
	}
}

// TestNATSOverMaxPayload publishes a message over the server's max_payload: refused, and the connection goes
// on publishing.
func TestNATSOverMaxPayload(t *testing.T) {
	admin := newNATSAdmin(t)
	_, subject := admin.stream(t, strings.ToUpper(uniqueName("adal")))
	p := newLoopbackPublisher(t)
	target := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}

	limit := admin.nc.MaxPayload()
	o := p.Send(context.Background(), testOutgoing(target, "big", make([]byte, limit)))
	wantKind(t, "message over max_payload", o, delivery.ErrBrokerRefused)
	if !strings.HasPrefix(o.ErrorMessage, "message of ") || !strings.HasSuffix(o.ErrorMessage, fmt.Sprintf("bytes is over the NATS server's limit of %d bytes", limit)) {
		t.Errorf("message %q, want it to give the size and the server's limit", o.ErrorMessage)
	}
	wantSuccess(t, "publish after the big one", p.Send(context.Background(), testOutgoing(target, "small", []byte(`{}`))))
}

// TestNATSConcurrentPublishes shares one connection between many attempts at once.
func TestNATSConcurrentPublishes(t *testing.T) {
	s, subject := newNATSAdmin(t).stream(t, strings.ToUpper(uniqueName("adal")))
	p := newLoopbackPublisher(t)
	target := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}

	const n = 200
	outcomes := make([]delivery.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outcomes[i] = p.Send(context.Background(), testOutgoing(target, fmt.Sprintf("m%d", i), []byte(fmt.Sprintf(`{"i":%d}`, i))))
		})
	}
	wg.Wait()
	answers := map[string]bool{}
	for i, o := range outcomes {
		wantSuccess(t, fmt.Sprintf("publish %d", i), o)
		if answers[o.Answer] {
			t.Errorf("two publishes answered %q", o.Answer)
		}
		answers[o.Answer] = true
	}
	if got := natsMessages(t, s); got != n {
		t.Errorf("the stream holds %d messages, want %d", got, n)
	}
}
