package webhook

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Standard Webhooks libraries' published example: this secret, id, timestamp and body sign to this.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorKey(t testing.TB) []byte {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(vectorSecret, SecretPrefix))
	require.NoError(t, err)
	return key
}

func TestSignerMatchesThePublishedExample(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	Signer{ID: vectorID, Keys: [][]byte{vectorKey(t)}, Headers: StandardSignatureHeaders}.
		Sign(h, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
	require.Equal(t, vectorID, h.Get("webhook-id"))
	require.Equal(t, "1614265330", h.Get("webhook-timestamp"))
	require.Equal(t, vectorSignature, h.Get("webhook-signature"))
	require.Equal(t, vectorSecret, FormatSecret(vectorKey(t)))
}

func TestSignerReplacesAndOrders(t *testing.T) {
	t.Parallel()
	other := make([]byte, 32)
	h := http.Header{"Webhook-Id": {"sender"}, "Webhook-Signature": {"v1,sender", "v1,again"}}
	Signer{ID: vectorID, Keys: [][]byte{vectorKey(t), other}, Headers: StandardSignatureHeaders}.
		Sign(h, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
	require.Equal(t, []string{vectorID}, h.Values("webhook-id"), "a sender's header of the same name is replaced")
	sigs := h.Values("webhook-signature")
	require.Len(t, sigs, 1)
	entries := strings.Split(sigs[0], " ")
	require.Len(t, entries, 2, "one signature per key, space-separated")
	require.Equal(t, vectorSignature, entries[0], "the newest key's first")
	require.NotEqual(t, entries[0], entries[1])

	h = http.Header{"Webhook-Id": {"sender"}}
	Signer{ID: vectorID, Keys: [][]byte{vectorKey(t)}, Headers: AdalSignatureHeaders}.Sign(h, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
	require.Equal(t, "sender", h.Get("webhook-id"), "Adal's names leave the sender's alone")
	require.Equal(t, vectorSignature, h.Get("X-Adal-Webhook-Signature"))

	h = http.Header{}
	Signer{ID: vectorID}.Sign(h, time.Now(), nil)
	require.Empty(t, h, "no key, no signature")
}

func TestKeys(t *testing.T) {
	t.Parallel()
	a, b := NewKey(), NewKey()
	require.Len(t, a, KeySize)
	require.NotEqual(t, a, b)
	require.NoError(t, CheckKey(a))
	require.NoError(t, CheckKey(make([]byte, MinKeySize)))
	require.NoError(t, CheckKey(make([]byte, MaxKeySize)))
	require.Error(t, CheckKey(make([]byte, MinKeySize-1)))
	require.Error(t, CheckKey(make([]byte, MaxKeySize+1)))
	require.Error(t, CheckKey(nil))
	secret := FormatSecret(a)
	require.True(t, strings.HasPrefix(secret, "whsec_"))
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	require.Equal(t, a, decoded)
}

// BenchmarkSign signs a 1 KiB body with one key, as every direct attempt of a recipient with a secret does.
func BenchmarkSign(b *testing.B) {
	s := Signer{ID: vectorID, Keys: [][]byte{vectorKey(b)}, Headers: AdalSignatureHeaders}
	body := []byte(strings.Repeat("x", 1024))
	at := time.Unix(vectorTimestamp, 0)
	b.ReportAllocs()
	for b.Loop() {
		s.Sign(http.Header{}, at, body)
	}
}
