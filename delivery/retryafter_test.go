package delivery

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/egress"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Time
	}{
		{"120", now.Add(2 * time.Minute)},
		{" 7 ", now.Add(7 * time.Second)},
		{"0", now},
		{"Mon, 01 Jun 2026 12:05:00 GMT", now.Add(5 * time.Minute)},  // IMF-fixdate
		{"Monday, 01-Jun-26 12:05:00 GMT", now.Add(5 * time.Minute)}, // RFC 850, still accepted by RFC 9110
		{"Mon Jun  1 12:05:00 2026", now.Add(5 * time.Minute)},       // asctime
		{"Mon, 01 Jun 2026 11:00:00 GMT", now.Add(-time.Hour)},       // in the past: NextAttempt keeps the schedule
		{"99999999999999999999", now.Add(366 * 24 * time.Hour)},      // bounded, no overflow
		{"", time.Time{}},
		{"-5", time.Time{}},
		{"+5", time.Time{}},
		{"1.5", time.Time{}},
		{"soon", time.Time{}},
		{"12 seconds", time.Time{}},
	} {
		require.True(t, tt.want.Equal(ParseRetryAfter(tt.in, now)), "%q: got %v, want %v", tt.in, ParseRetryAfter(tt.in, now), tt.want)
	}
}

// TestNextAttemptHeedsRetryAfter: a Retry-After moves the next attempt to no earlier than the schedule and no
// later than twice the scheduled wait after the attempt; the attempt still counts.
func TestNextAttemptHeedsRetryAfter(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	end := first.Add(time.Second)
	failed := func(retryAfter time.Time) Outcome {
		return Outcome{StartedAt: first, FinishedAt: end, HTTPStatus: 429, ErrorKind: ErrHTTPStatus, RetryAfter: retryAfter}
	}
	// QUADRATIC, attempt 2 of 10: the schedule waits 4 minutes after the end of attempt 1.
	scheduled := end.Add(4 * time.Minute)
	for _, tt := range []struct {
		name       string
		retryAfter time.Time
		want       time.Time
	}{
		{"none", time.Time{}, scheduled},
		{"earlier than the schedule", end.Add(30 * time.Second), scheduled},
		{"in the past", end.Add(-time.Hour), scheduled},
		{"exactly the schedule", scheduled, scheduled},
		{"between", end.Add(6 * time.Minute), end.Add(6 * time.Minute)},
		{"exactly twice", end.Add(8 * time.Minute), end.Add(8 * time.Minute)},
		{"beyond twice", end.Add(8*time.Minute + time.Second), end.Add(8 * time.Minute)},
		{"days away", end.Add(72 * time.Hour), end.Add(8 * time.Minute)},
	} {
		succeeded, due := NextAttempt(1, 10, Quadratic, first, failed(tt.retryAfter), time.Minute)
		require.False(t, succeeded, tt.name)
		require.NotNil(t, due, tt.name)
		require.True(t, tt.want.Equal(*due), "%s: due %v, want %v", tt.name, *due, tt.want)
	}

	// EXPONENTIAL counts from the first attempt: retry 3 is due 593.6 s after it, a wait of 592.6 s after an
	// attempt that ended 1 s in, so the cap is 2·592.6 s after that end.
	expDue := first.Add(593600 * time.Millisecond)
	capAt := end.Add(2 * 592600 * time.Millisecond)
	_, due := NextAttempt(3, 12, Exponential, first, failed(end.Add(time.Hour)), time.Minute)
	require.True(t, capAt.Equal(*due), "due %v, want %v", *due, capAt)
	_, due = NextAttempt(3, 12, Exponential, first, failed(expDue.Add(time.Minute)), time.Minute)
	require.True(t, expDue.Add(time.Minute).Equal(*due), "due %v", *due)

	// The attempt still counts: the last one fails the delivery whatever the recipient asked.
	succeeded, due := NextAttempt(10, 10, Quadratic, first, failed(end.Add(time.Minute)), time.Minute)
	require.False(t, succeeded)
	require.Nil(t, due)
}

// TestSenderReadsRetryAfter: the sender carries Retry-After of a 429 or a 503, in seconds or as an HTTP date,
// and ignores it on other statuses.
func TestSenderReadsRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	answers := map[string]struct {
		status     int
		retryAfter string
	}{
		"/seconds":  {http.StatusTooManyRequests, "120"},
		"/date":     {http.StatusServiceUnavailable, "Mon, 01 Jun 2026 12:10:00 GMT"},
		"/other":    {http.StatusInternalServerError, "120"},
		"/bad":      {http.StatusTooManyRequests, "later"},
		"/no-value": {http.StatusServiceUnavailable, ""},
	}
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
	}))
	s := NewHTTPSender(egress.Policy{AllowPrivate: true}, 0, func() time.Time { return now })
	t.Cleanup(s.CloseIdleConnections)
	send := func(path string) Outcome {
		return s.Send(context.Background(), Outgoing{Method: http.MethodPost, URL: srv.URL + path, Attempt: 1})
	}

	o := send("/seconds")
	require.Equal(t, 429, o.HTTPStatus)
	require.Equal(t, ErrHTTPStatus, o.ErrorKind, "the attempt still fails")
	require.True(t, now.Add(2*time.Minute).Equal(o.RetryAfter), "%v", o.RetryAfter)
	o = send("/date")
	require.Equal(t, 503, o.HTTPStatus)
	require.True(t, now.Add(10*time.Minute).Equal(o.RetryAfter), "%v", o.RetryAfter)
	for _, path := range []string{"/other", "/bad", "/no-value"} {
		require.True(t, send(path).RetryAfter.IsZero(), path)
	}
}
