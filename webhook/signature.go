package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Every delivery is signed the Standard Webhooks way, so that a recipient can tell Adal's deliveries from
// forgeries and replays with any of that scheme's libraries: an id, a timestamp and, for each of the
// recipient's current keys, "v1," and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}".

// SecretPrefix starts a signing secret as it is shown: the key's bytes follow, base64-encoded.
const SecretPrefix = "whsec_"

// Bounds of a signing key's size, in bytes; a new key has KeySize.
const (
	MinKeySize = 24
	MaxKeySize = 64
	KeySize    = 32
)

// SignatureHeaders names the three headers that carry a delivery's signature.
type SignatureHeaders struct {
	ID, Timestamp, Signature string
}

// The two sets of names a recipient chooses from. Adal's own names leave a sender's Standard Webhooks headers
// untouched (as X-Adal-*, no sender can set them); the standard names replace a sender's.
var (
	AdalSignatureHeaders     = SignatureHeaders{ID: "X-Adal-Webhook-Id", Timestamp: "X-Adal-Webhook-Timestamp", Signature: "X-Adal-Webhook-Signature"}
	StandardSignatureHeaders = SignatureHeaders{ID: "Webhook-Id", Timestamp: "Webhook-Timestamp", Signature: "Webhook-Signature"}
)

// NewKey returns a new random signing key of KeySize bytes.
func NewKey() []byte {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the OS entropy source never fails on supported systems
	}
	return key
}

// CheckKey reports whether key is a usable signing key: MinKeySize to MaxKeySize bytes.
func CheckKey(key []byte) error {
	if len(key) < MinKeySize || len(key) > MaxKeySize {
		return fmt.Errorf("a signing key has %d to %d bytes, not %d", MinKeySize, MaxKeySize, len(key))
	}
	return nil
}

// FormatSecret is key as a recipient configures it: SecretPrefix and the key in standard base64.
func FormatSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Signer signs the attempts of one delivery.
type Signer struct {
	// ID identifies the message: the request key, the same on every attempt of the request.
	ID string
	// Keys are the recipient's signing keys, newest first: one signature each. None signs nothing.
	Keys [][]byte
	// Headers names the headers the signature goes in.
	Headers SignatureHeaders
}

// Sign sets the signature headers of an attempt that starts at, with body, on h, replacing any of the same
// names; it does nothing without keys.
func (s Signer) Sign(h http.Header, at time.Time, body []byte) {
	if len(s.Keys) == 0 {
		return
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	// What is signed, id.timestamp.body, is the same for every key: the body is written to each MAC after the
	// prefix rather than copied behind it, and the signatures go into one header value as they are made.
	prefix := make([]byte, 0, len(s.ID)+len(ts)+2)
	prefix = append(append(append(append(prefix, s.ID...), '.'), ts...), '.')
	const sigLen = len("v1,") + 44 // 44: a SHA-256 MAC in standard base64
	value := make([]byte, 0, len(s.Keys)*(sigLen+1))
	var sum [sha256.Size]byte
	for i, key := range s.Keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		mac.Write(body)
		if i > 0 {
			value = append(value, ' ')
		}
		value = base64.StdEncoding.AppendEncode(append(value, "v1,"...), mac.Sum(sum[:0]))
	}
	h.Set(s.Headers.ID, s.ID)
	h.Set(s.Headers.Timestamp, ts)
	h.Set(s.Headers.Signature, string(value))
}
