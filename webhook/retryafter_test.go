package webhook_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/webhook"
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
		require.True(t, tt.want.Equal(webhook.ParseRetryAfter(tt.in, now)), "%q: got %v, want %v", tt.in, webhook.ParseRetryAfter(tt.in, now), tt.want)
	}
}

// TestRetryAfterSeconds: what the adal CLI reports of its local service's answer — whole seconds from now,
// rounded up, only for the statuses that may ask to wait, and nothing for a time already past.
func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 500_000_000, time.UTC)
	with := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	for _, tt := range []struct {
		status int
		h      http.Header
		want   int
	}{
		{503, with("120"), 120},
		{429, with("7"), 7},
		{429, with("Mon, 01 Jun 2026 12:05:00 GMT"), 300}, // 299.5 s away: rounded up
		{429, with("Mon, 01 Jun 2026 11:00:00 GMT"), 0},   // in the past
		{503, with("0"), 0},
		{503, with("soon"), 0},
		{503, http.Header{}, 0},
		{500, with("120"), 0}, // only 429 and 503 may ask
		{200, with("120"), 0},
		{301, with("120"), 0},
	} {
		require.Equal(t, tt.want, webhook.RetryAfterSeconds(tt.status, tt.h, now), "%d %v", tt.status, tt.h)
	}
	require.True(t, webhook.AsksToWait(429) && webhook.AsksToWait(503) && !webhook.AsksToWait(502))
}
