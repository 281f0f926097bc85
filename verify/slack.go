package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Slack's headers: the request's Unix timestamp, and v0=<hex HMAC-SHA256 of "v0:{timestamp}:{body}">.
const (
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackSignatureHeader = "X-Slack-Signature"
)

// slack verifies Slack's signing secret scheme; a timestamp further than tolerance from now is stale.
type slack struct {
	secrets   [][]byte
	tolerance time.Duration
}

func (s *slack) Verify(r *Request) error {
	sig := r.Header.Get(slackSignatureHeader)
	ts := r.Header.Get(slackTimestampHeader)
	switch {
	case sig == "":
		return fail(ReasonMissing, "no %s header", slackSignatureHeader)
	case ts == "":
		return fail(ReasonMissing, "no %s header", slackTimestampHeader)
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(ReasonMalformed, "%s is not a Unix time", slackTimestampHeader)
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return fail(ReasonMalformed, "%s does not start with v0=", slackSignatureHeader)
	}
	sent, err := hex.DecodeString(hexSig)
	if err != nil {
		return fail(ReasonMalformed, "%s is not hex", slackSignatureHeader)
	}
	if !anyEqual(sent, macs(sha256.New, s.secrets, []byte("v0:"+ts+":"), r.Body)...) {
		return fail(ReasonMismatch, "%s matches no secret", slackSignatureHeader)
	}
	if !within(t, r.Now, s.tolerance) {
		return fail(ReasonStale, "%s is more than %s from now", slackTimestampHeader, s.tolerance)
	}
	return nil
}

// SlackChallenge returns the challenge of Slack's url_verification request, which Slack sends when an Events
// API URL is set and expects echoed back; ok is false for any other body. Only a verified request's body
// should be answered.
func SlackChallenge(body []byte) (challenge string, ok bool) {
	if !bytes.Contains(body, []byte("url_verification")) { // most events are not: spare them the parse
		return "", false
	}
	var m struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &m) != nil || m.Type != "url_verification" || m.Challenge == "" {
		return "", false
	}
	return m.Challenge, true
}
