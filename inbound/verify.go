package inbound

import (
	"net/http"

	"github.com/adal-relay/adal/rejection"
	"github.com/adal-relay/adal/verify"
)

// verify checks a read request against its server's verification, before anything is stored. It returns the
// outcome to store with the request (nil when the server verifies nothing), and the status it answered when it
// answers itself — 401 for a failure the server enforces, the challenge of Slack's url_verification —: the
// request is then neither stored, nor charged, nor delivered. 0 says to go on storing it.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request, info *keyInfo, suffix string, body []byte, source string) (verified *bool, answered int) {
	s := info.senders
	if s == nil || s.verifier == nil {
		return nil, 0
	}
	now := h.cfg.Now()
	err := s.verifier.Verify(&verify.Request{Header: r.Header, RawQuery: r.URL.RawQuery, Body: body, Now: now})
	passed := err == nil
	if !passed && s.enforce {
		reason, message := verify.ReasonMalformed, err.Error()
		if f, isFailure := err.(*verify.Failure); isFailure {
			reason, message = f.Reason, f.Message
		}
		if h.cfg.Rejected != nil {
			h.cfg.Rejected(reason)
		}
		if h.cfg.Rejections != nil {
			h.cfg.Rejections.Record(rejection.Entry{ServerID: info.serverID, TenantID: info.tenantID, At: now,
				Method: r.Method, Path: suffix, SourceAddr: source, Reason: reason, Message: message})
		}
		return nil, h.answer(w, http.StatusUnauthorized, map[string]string{"error": "verification failed: " + string(reason)})
	}
	if passed && s.kind == verify.KindSlack {
		if challenge, isChallenge := verify.SlackChallenge(body); isChallenge {
			return nil, h.answer(w, http.StatusOK, map[string]string{"challenge": challenge})
		}
	}
	return &passed, 0
}
