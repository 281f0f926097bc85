package auth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/adal-relay/adal/viewer"
)

// Middleware puts the viewer named by an "Authorization: Bearer <jwt>" header on the request context.
//
// A request without the header passes through with no viewer: some operations need none, and the GraphQL
// layer answers UNAUTHENTICATED where one is needed, in the same error shape as every other GraphQL error.
// A header that is present but unusable (wrong scheme, bad or expired token) is answered here with 401 and
// a GraphQL-shaped body: silently treating it as anonymous would hide an expired token behind confusing
// FORBIDDEN/NOT_FOUND answers.
//
// Mount it on the API routes (/graphql) only, not on /in/{key}: webhook senders routinely send their own
// Authorization headers, which are meant for the recipient and must not be judged here.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := r.Header["Authorization"]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		token, err := bearerToken(strings.Join(h, ","))
		var v viewer.Viewer
		var t Token
		if err == nil {
			v, t, err = a.VerifyToken(token)
		}
		if err != nil {
			writeUnauthenticated(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(viewer.NewContext(r.Context(), v), t)))
	})
}

// ViewerFromInitPayload authenticates a GraphQL websocket connection from its connection_init payload,
// where browsers put the token because they cannot set headers on a websocket upgrade. It accepts
// "Authorization": "Bearer <jwt>" (also spelled "authorization", as several clients lowercase it), or the
// bare token under "authToken" or "token". With no token at all it returns ErrMissingToken; any other
// error wraps ErrInvalidToken.
func (a *Authenticator) ViewerFromInitPayload(payload map[string]any) (viewer.Viewer, Token, error) {
	token, err := initPayloadToken(payload)
	if err != nil {
		return viewer.Viewer{}, Token{}, err
	}
	return a.VerifyToken(token)
}

// initPayloadToken finds the raw token in a websocket init payload, in a fixed order of precedence so the
// outcome never depends on map iteration.
func initPayloadToken(payload map[string]any) (string, error) {
	for _, k := range []string{"Authorization", "authorization", "authToken", "token"} {
		raw, ok := payload[k]
		if !ok {
			continue
		}
		s, ok := raw.(string)
		switch {
		case !ok:
			return "", fmt.Errorf("%w: %s must be a string", ErrInvalidToken, k)
		case strings.EqualFold(k, "Authorization"):
			return bearerToken(s)
		case s == "":
			return "", fmt.Errorf("%w: %s is empty", ErrInvalidToken, k)
		}
		return s, nil // authToken and token carry the bare token
	}
	return "", ErrMissingToken
}

// bearerToken extracts the token from an Authorization value. The scheme is matched case-insensitively
// (RFC 9110 §11.1); anything other than a single non-empty Bearer token is refused.
func bearerToken(h string) (string, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: Authorization must be \"Bearer <token>\"", ErrInvalidToken)
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t,") {
		return "", fmt.Errorf("%w: Authorization must be \"Bearer <token>\"", ErrInvalidToken)
	}
	return token, nil
}

// gqlError mirrors one entry of a GraphQL response's "errors" list, so clients parse a 401 from the
// middleware exactly like an UNAUTHENTICATED answer from a resolver.
type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// writeUnauthenticated answers 401 in GraphQL error shape. err's text always starts with "invalid token:"
// because every error reaching here wraps ErrInvalidToken.
func writeUnauthenticated(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	// RFC 6750 §3: tells generic HTTP clients why, and that a fresh token is the fix.
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(struct {
		Errors []gqlError `json:"errors"`
	}{Errors: []gqlError{{
		Message:    err.Error(),
		Extensions: map[string]any{"code": "UNAUTHENTICATED"},
	}}})
}
