package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Load is an open-model load: request i is sent at start + i/Rate whether or not earlier requests have been
// answered, so a slow server builds a queue the latency shows instead of slowing the generator down (no
// coordinated omission). Latency is measured from the scheduled send time.
type Load struct {
	Rate     float64       // requests per second
	Duration time.Duration // how long requests are scheduled
	Targets  []string      // inbound URLs, used round robin
	Body     []byte
	// Conns bounds the requests in flight (and the client's connections); requests beyond it wait for a free
	// sender, and that wait counts in their latency. Default 512.
	Conns int
	// Timeout bounds one request, answer included. Default 30s.
	Timeout time.Duration
	// KeepIDs decodes the requestId of every 202 (for the latency ledger).
	KeepIDs bool
}

// Sent is one request of a load run.
type Sent struct {
	Scheduled time.Time
	Latency   time.Duration // scheduled send → full answer
	Status    int           // 0 when the request failed without an answer
	RequestID int64         // with KeepIDs, for a 202
}

// LoadResult is what a load run saw.
type LoadResult struct {
	Offered  float64
	Start    time.Time
	End      time.Time // the last answer
	Requests []Sent
}

// Accepted counts the 202 answers.
func (r LoadResult) Accepted() int { return r.count(http.StatusAccepted) }

func (r LoadResult) count(status int) int {
	n := 0
	for _, s := range r.Requests {
		if s.Status == status {
			n++
		}
	}
	return n
}

// Failed counts requests without an answer (connection error, timeout).
func (r LoadResult) Failed() int { return r.count(0) }

// Others counts answers other than 202.
func (r LoadResult) Others() int { return len(r.Requests) - r.Accepted() - r.Failed() }

// AcceptedPerSecond is the 202 answers per second from the first scheduled send to the last answer.
func (r LoadResult) AcceptedPerSecond() float64 {
	d := r.End.Sub(r.Start)
	if d <= 0 {
		return 0
	}
	return float64(r.Accepted()) / d.Seconds()
}

// Latencies are the latencies of the 202 answers, optionally only of requests scheduled within [from, to).
func (r LoadResult) Latencies(from, to time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(r.Requests))
	for _, s := range r.Requests {
		if s.Status != http.StatusAccepted {
			continue
		}
		if !from.IsZero() && (s.Scheduled.Before(from) || !s.Scheduled.Before(to)) {
			continue
		}
		out = append(out, s.Latency)
	}
	return out
}

// acceptedBetween counts the 202 answers that arrived within [from, to).
func (r LoadResult) acceptedBetween(from, to time.Time) int64 {
	var n int64
	for _, s := range r.Requests {
		if at := s.Scheduled.Add(s.Latency); s.Status == http.StatusAccepted && !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// BySecond groups the answers' latencies (every status, and no answer) by the second of the run each request
// was scheduled in, from 0.
func (r LoadResult) BySecond() map[int][]time.Duration {
	out := map[int][]time.Duration{}
	for _, s := range r.Requests {
		sec := int(s.Scheduled.Sub(r.Start) / time.Second)
		out[sec] = append(out[sec], s.Latency)
	}
	return out
}

// Run sends the load and waits for every answer (or its timeout).
func (l Load) Run(ctx context.Context) LoadResult {
	if l.Conns == 0 {
		l.Conns = 512
	}
	if l.Timeout == 0 {
		l.Timeout = 30 * time.Second
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxConnsPerHost:     l.Conns,
		MaxIdleConns:        l.Conns,
		MaxIdleConnsPerHost: l.Conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: l.Timeout}
	n := int(l.Rate * l.Duration.Seconds())
	res := LoadResult{Offered: l.Rate, Requests: make([]Sent, n)}
	interval := time.Duration(float64(time.Second) / l.Rate)
	res.Start = time.Now().Add(20 * time.Millisecond)
	// Requests due are queued (as indexes: a backlog costs memory for nothing else) to Conns senders; a
	// request that waits for a sender has that wait in its latency, since latency runs from its schedule.
	due := make(chan int, n)
	var wg sync.WaitGroup
	ends := make([]time.Time, l.Conns)
	for w := range l.Conns {
		wg.Go(func() {
			for i := range due {
				s := &res.Requests[i]
				s.Scheduled = res.Start.Add(time.Duration(i) * interval)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.Targets[i%len(l.Targets)], bytes.NewReader(l.Body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					if l.KeepIDs && resp.StatusCode == http.StatusAccepted {
						var body struct {
							RequestID string `json:"requestId"`
						}
						if json.NewDecoder(resp.Body).Decode(&body) == nil {
							s.RequestID, _ = strconv.ParseInt(body.RequestID, 10, 64)
						}
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					s.Status = resp.StatusCode
				}
				ends[w] = time.Now()
				s.Latency = ends[w].Sub(s.Scheduled)
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(res.Start.Add(time.Duration(i) * interval)); d > 200*time.Microsecond {
			time.Sleep(d)
		}
		due <- i
	}
	close(due)
	wg.Wait()
	for _, e := range ends {
		if e.After(res.End) {
			res.End = e
		}
	}
	return res
}

// body1K is a 1 KiB JSON webhook body.
func body1K() []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"invoice.paid","data":"`)
	for b.Len() < 1024-2 {
		b.WriteByte('x')
	}
	b.WriteString(`"}`)
	return b.Bytes()
}
