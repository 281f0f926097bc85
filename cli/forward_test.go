package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/webhook"
)

func TestForwardClassifiesOutcomes(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var gotBody string
	status, retryAfter := 200, ""
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		got, gotBody = r.Clone(context.Background()), string(b)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	client := newLocalClient()
	key := "k1"
	j := &job{DeliveryID: "7", Attempt: 3, Method: "PATCH", Path: "/evt", Query: "q=1", RequestID: "42",
		IdempotencyKey: &key, Headers: []header{{"Host", "evil"}, {"X-Adal-Attempt", "9"}, {"Connection", "X-Hop"},
			{"X-Hop", "1"}, {"X-Keep", "a"}, {"X-Keep", "b"}, {"Content-Length", "1"}}}

	o := forward(t.Context(), client, srv.URL+"/hook", j, []byte("body"), time.Now)
	require.Empty(t, o.ErrorKind)
	require.Equal(t, 200, o.HTTPStatus)
	require.Equal(t, "PATCH", got.Method)
	require.Equal(t, "/hook/evt?q=1", got.URL.RequestURI())
	require.Equal(t, "body", gotBody)
	require.Equal(t, "3", got.Header.Get("X-Adal-Attempt"))
	require.Equal(t, "42", got.Header.Get("X-Adal-Request-Id"))
	require.Equal(t, "k1", got.Header.Get("X-Adal-Idempotency"))
	require.Equal(t, []string{"a", "b"}, got.Header.Values("X-Keep"))
	require.Empty(t, got.Header.Get("X-Hop"))
	require.NotEqual(t, "evil", got.Host)
	require.Equal(t, webhook.UserAgent, got.Header.Get("User-Agent"))

	status = 503
	o = forward(t.Context(), client, srv.URL, j, nil, time.Now)
	require.Equal(t, "HTTP_STATUS", o.ErrorKind)
	require.Equal(t, 503, o.HTTPStatus)
	require.Equal(t, "local service answered 503 Service Unavailable", o.ErrorMessage)
	require.Zero(t, o.RetryAfterSeconds, "no Retry-After, no wait asked")

	status, retryAfter = 429, "120"
	o = forward(t.Context(), client, srv.URL, j, nil, time.Now)
	require.Equal(t, 429, o.HTTPStatus)
	require.Equal(t, 120, o.RetryAfterSeconds, "the wait the local service asked for, to report")
	status = 500
	o = forward(t.Context(), client, srv.URL, j, nil, time.Now)
	require.Zero(t, o.RetryAfterSeconds, "only a 429 or a 503 may ask to wait")
	retryAfter = ""

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	o = forward(t.Context(), client, deadURL, j, nil, time.Now)
	require.Equal(t, "CLI_LOCAL", o.ErrorKind)
	require.Contains(t, o.ErrorMessage, "local service unreachable")
	require.Zero(t, o.HTTPStatus)

	slow := *j
	slow.Path, slow.TimeoutSeconds = "/slow", 1
	o = forward(t.Context(), client, srv.URL, &slow, nil, time.Now)
	require.Equal(t, "TIMEOUT", o.ErrorKind)
	require.GreaterOrEqual(t, o.FinishedAt.Sub(o.StartedAt), time.Second)
}
