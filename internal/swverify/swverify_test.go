package swverify

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The verifier accepts the Standard Webhooks libraries' published example and refuses what the specification
// says to refuse: it is the yardstick of the signing tests, so it is checked against the specification too.
func TestVerifyThePublishedExample(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	require.NoError(t, Verify(secret, Standard, h, body, at))
	require.NoError(t, Verify(secret, Standard, h, body, at.Add(Tolerance)), "at the edge of the tolerance")
	require.ErrorIs(t, Verify(secret, Standard, h, body, at.Add(Tolerance+time.Second)), ErrTooOld)
	require.ErrorIs(t, Verify(secret, Standard, h, body, at.Add(-Tolerance-time.Second)), ErrTooNew)
	require.ErrorIs(t, Verify(secret, Standard, h, []byte(`{"test": 2432232315}`), at), ErrNoMatch)
	require.ErrorIs(t, Verify("whsec_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Standard, h, body, at), ErrNoMatch)
	require.ErrorIs(t, Verify(secret, Adal, h, body, at), ErrMissing)

	multi := h.Clone()
	multi.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,x "+h.Get("webhook-signature"))
	require.NoError(t, Verify(secret, Standard, multi, body, at), "any entry may match")
	require.Equal(t, 3, len(Entries(Standard, multi)))
	moved := h.Clone()
	moved.Set("webhook-timestamp", "1614265331")
	require.ErrorIs(t, Verify(secret, Standard, moved, body, at), ErrNoMatch, "the timestamp is signed")
}
