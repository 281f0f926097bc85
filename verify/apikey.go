package verify

import (
	"net/url"
	"strings"
)

// apiKey verifies a key sent in a header (as it is, or after "Bearer ") or in a query parameter.
type apiKey struct {
	header, parameter string
	keys              [][]byte // digests of the keys
}

func newAPIKey(header, parameter string, keys []string) *apiKey {
	a := &apiKey{header: header, parameter: parameter}
	for _, k := range keys {
		a.keys = append(a.keys, digest([]byte(k)))
	}
	return a
}

func (a *apiKey) Verify(r *Request) error {
	var sent string
	if a.header != "" {
		sent = strings.TrimSpace(r.Header.Get(a.header))
		if scheme, token, ok := strings.Cut(sent, " "); ok && strings.EqualFold(scheme, "Bearer") {
			sent = strings.TrimSpace(token)
		}
		if sent == "" {
			return fail(ReasonMissing, "no %s header", a.header)
		}
	} else {
		q, err := url.ParseQuery(r.RawQuery)
		if err != nil && q.Get(a.parameter) == "" {
			return fail(ReasonMalformed, "the query string cannot be read")
		}
		if sent = q.Get(a.parameter); sent == "" {
			return fail(ReasonMissing, "no %s query parameter", a.parameter)
		}
	}
	if !anyEqual(digest([]byte(sent)), a.keys...) {
		return fail(ReasonMismatch, "the key matches none set")
	}
	return nil
}
