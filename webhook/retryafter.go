package webhook

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds a Retry-After in seconds before it becomes a time, so that no value can overflow; the
// retry schedule caps the wait far below it anyway.
const MaxRetryAfter = 366 * 24 * time.Hour

// AsksToWait reports whether a recipient answering status may ask, with Retry-After, when to be called again:
// 429 Too Many Requests and 503 Service Unavailable. Other statuses' Retry-After is ignored.
func AsksToWait(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): a number of seconds after now, or an HTTP
// date. It returns the zero time for an absent or malformed value.
func ParseRetryAfter(v string, now time.Time) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			secs = math.MaxUint64 // all digits, just many of them
		case err != nil:
			return time.Time{}
		}
		return AfterSeconds(now, secs)
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return time.Time{}
	}
	return at
}

// AfterSeconds is secs seconds after now, bounded by MaxRetryAfter.
func AfterSeconds(now time.Time, secs uint64) time.Time {
	return now.Add(time.Duration(min(secs, uint64(MaxRetryAfter/time.Second))) * time.Second)
}

// RetryAfterSeconds is how long, in whole seconds rounded up, a recipient that answered status with the
// headers h asked to wait from now: 0 when it asked nothing (or a time already past), or status does not let
// it ask (AsksToWait). The adal CLI reports it so, relative, since only the server's clock places attempts.
func RetryAfterSeconds(status int, h http.Header, now time.Time) int {
	if !AsksToWait(status) {
		return 0
	}
	at := ParseRetryAfter(h.Get("Retry-After"), now)
	if !at.After(now) {
		return 0
	}
	return int((at.Sub(now) + time.Second - 1) / time.Second)
}
