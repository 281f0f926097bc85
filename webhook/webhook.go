// Package webhook is the shape of the HTTP request a recipient receives, wherever it is sent from: the
// server's direct sender (delivery) and the adal CLI's local call (cli) both build it here, so a developer's
// localhost sees exactly what a deployed recipient would. It has no dependencies beyond the standard library,
// which keeps the CLI free of the server's database drivers.
package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// UserAgent is sent when the relayed request had no User-Agent of its own, so that recipients (and their
// firewalls, which often drop requests without one) can tell who is calling instead of seeing Go's default.
const UserAgent = "Adal-Webhook-Relay"

// The headers Adal sets on every delivered request.
const (
	// HeaderRequestID carries the id of the accepted request, identical across attempts and recipients.
	HeaderRequestID = "X-Adal-Request-Id"
	// HeaderAttempt carries the attempt number, starting at 1.
	HeaderAttempt = "X-Adal-Attempt"
	// HeaderIdempotency carries the request key when the recipient asked for it.
	HeaderIdempotency = "X-Adal-Idempotency"
	// HeaderVerified says whether the request passed its server's sender verification (true|false); absent
	// when the server verifies nothing.
	HeaderVerified = "X-Adal-Verified"
	// HeaderPrefix marks headers that only Adal may set; received copies are dropped so senders cannot spoof
	// them.
	HeaderPrefix = "X-Adal-"
	// HeaderTraceparent is the W3C trace context header. A sender's is forwarded like any header; an attempt
	// to a recipient with sendTraceparent, while the server traces, replaces it with one naming the attempt's
	// own span.
	HeaderTraceparent = "Traceparent"
)

// hopByHop lists the headers that describe one connection, not the message (RFC 9110 §7.6.1), plus the
// ones the transport must compute itself. Expect is dropped because the relay already holds the whole body
// and waiting for a 100 Continue would only add latency.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Trailers":            true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Host":                true,
	"Content-Length":      true,
	"Expect":              true,
}

// Forwarded copies the received headers that are meant for the recipient: all but the hop-by-hop ones, those
// the Connection header names, and any X-Adal- header a sender tried to set.
func Forwarded(in http.Header) http.Header {
	drop := map[string]bool{}
	for _, v := range in.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				drop[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	out := make(http.Header, len(in)+3)
	for name, values := range in {
		canon := http.CanonicalHeaderKey(name)
		if hopByHop[canon] || drop[canon] || strings.HasPrefix(canon, HeaderPrefix) {
			continue
		}
		out[canon] = append(out[canon], values...)
	}
	return out
}

// SetVerified sets HeaderVerified from a request's verification outcome; nil (no verification) sets nothing.
func SetVerified(h http.Header, verified *bool) {
	if verified != nil {
		h.Set(HeaderVerified, strconv.FormatBool(*verified))
	}
}

// JoinTarget builds the URL an inbound request is delivered to: the recipient's base URL, followed by the
// path suffix received after /in/{key} and the query string. pathSuffix is in escaped form (as in
// url.URL.EscapedPath) so that encoded characters reach the recipient exactly as they arrived; rawQuery is
// appended after the base URL's own query, if any.
//
// Dot segments ("." and "..", also percent-encoded) in the suffix are resolved within the suffix and can
// never climb above the base path: whoever knows an inbound URL must not be able to reach other paths of the
// recipient's host than the one the tenant configured.
func JoinTarget(base, pathSuffix, rawQuery string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("missing host")
	}
	suffix, err := cleanSuffix(pathSuffix)
	if err != nil {
		return "", err
	}
	joined := u.EscapedPath()
	if suffix != "" {
		joined = strings.TrimSuffix(joined, "/") + "/" + suffix
	}
	if joined != "" {
		if u.Path, err = url.PathUnescape(joined); err != nil {
			return "", fmt.Errorf("path: %w", err)
		}
		u.RawPath = joined
	}
	switch {
	case rawQuery == "":
	case u.RawQuery == "":
		u.RawQuery = rawQuery
	default:
		u.RawQuery += "&" + rawQuery
	}
	u.ForceQuery = false
	u.Fragment, u.RawFragment = "", "" // never sent over the wire anyway
	return u.String(), nil
}

// cleanSuffix resolves dot segments of an escaped path suffix and returns it without its leading slash.
// A trailing slash is kept: /hook and /hook/ may be different resources.
func cleanSuffix(suffix string) (string, error) {
	suffix = strings.TrimLeft(suffix, "/")
	if suffix == "" {
		return "", nil
	}
	segments := strings.Split(suffix, "/")
	kept := make([]string, 0, len(segments))
	trailing := false
	for i, seg := range segments {
		decoded, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("path suffix: %w", err)
		}
		last := i == len(segments)-1
		switch decoded {
		case ".":
			trailing = last
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			}
			trailing = last
		default:
			kept = append(kept, seg)
			trailing = false
		}
	}
	out := strings.Join(kept, "/")
	if trailing && out != "" {
		out += "/"
	}
	return out, nil
}

// PathWithQuery is the request's path after /in/{key} with its query, as a broker message carries it
// (X-Adal-Path): always starting with "/", the query after "?" when there is one.
func PathWithQuery(pathSuffix, rawQuery string) string {
	p := "/" + strings.TrimPrefix(pathSuffix, "/")
	if rawQuery != "" {
		p += "?" + rawQuery
	}
	return p
}

// ValidHeaderName reports whether s is an RFC 9110 token, as header names (and methods) must be.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue refuses control characters other than horizontal tab, so that no value can inject a
// header line (CR, LF).
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
