package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/viewer"
)

// serve runs one request through the middleware and reports what the wrapped handler saw.
func serve(t *testing.T, a *auth.Authenticator, authz []string) (rec *httptest.ResponseRecorder, called bool, v viewer.Viewer, hasViewer bool) {
	t.Helper()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		v, hasViewer = viewer.FromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	req := httptest.NewRequest(http.MethodPost, "/graphql", nil)
	for _, h := range authz {
		req.Header.Add("Authorization", h)
	}
	rec = httptest.NewRecorder()
	a.Middleware(next).ServeHTTP(rec, req)
	return rec, called, v, hasViewer
}

func TestMiddlewareValid(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	want := viewer.Viewer{Role: viewer.Member, TenantID: 3, Subject: "bob"}
	tok := mustIssue(t, a, want, time.Hour)

	for _, h := range []string{"Bearer " + tok, "bearer " + tok, "  Bearer   " + tok + " "} {
		rec, called, v, ok := serve(t, a, []string{h})
		require.Equal(t, http.StatusNoContent, rec.Code, h)
		require.True(t, called)
		require.True(t, ok)
		require.Equal(t, want, v)
	}
}

func TestMiddlewareMissingPassesThrough(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	rec, called, _, ok := serve(t, a, nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.True(t, called)
	require.False(t, ok, "no viewer without a token")
}

func TestMiddlewareInvalid(t *testing.T) {
	t.Parallel()
	a, c := newAuth(t)
	expired := mustIssue(t, a, viewer.Viewer{Role: viewer.Admin, Subject: "ops"}, time.Minute)
	c.Set(t0.Add(time.Hour))
	fresh := mustIssue(t, a, viewer.Viewer{Role: viewer.Admin, Subject: "ops"}, time.Hour)

	for name, h := range map[string][]string{
		"expired":      {"Bearer " + expired},
		"garbage":      {"Bearer not-a-jwt"},
		"empty bearer": {"Bearer "},
		"empty header": {""},
		"basic scheme": {"Basic dXNlcjpwYXNz"},
		"no scheme":    {fresh},
		"two headers":  {"Bearer " + fresh, "Bearer " + fresh},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec, called, _, _ := serve(t, a, h)
			require.False(t, called, "the handler must not run")
			require.Equal(t, http.StatusUnauthorized, rec.Code)
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")

			var body struct {
				Errors []struct {
					Message    string         `json:"message"`
					Extensions map[string]any `json:"extensions"`
				} `json:"errors"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Len(t, body.Errors, 1)
			require.Regexp(t, `^invalid token: .+`, body.Errors[0].Message)
			require.Equal(t, "UNAUTHENTICATED", body.Errors[0].Extensions["code"])
		})
	}
}

func TestMiddlewareExpiredMessage(t *testing.T) {
	t.Parallel()
	a, c := newAuth(t)
	tok := mustIssue(t, a, viewer.Viewer{Role: viewer.Admin, Subject: "ops"}, time.Minute)
	c.Set(t0.Add(time.Hour))
	rec, _, _, _ := serve(t, a, []string{"Bearer " + tok})
	require.Contains(t, rec.Body.String(), "expired")
}

func TestViewerFromInitPayload(t *testing.T) {
	t.Parallel()
	a, _ := newAuth(t)
	want := viewer.Viewer{Role: viewer.Owner, TenantID: 9, Subject: "carol"}
	tok := mustIssue(t, a, want, time.Hour)

	for name, p := range map[string]map[string]any{
		"Authorization":           {"Authorization": "Bearer " + tok},
		"authorization lowercase": {"authorization": "Bearer " + tok},
		"authToken":               {"authToken": tok},
		"token":                   {"token": tok},
		"Authorization wins":      {"Authorization": "Bearer " + tok, "token": "junk"},
	} {
		v, _, err := a.ViewerFromInitPayload(p)
		require.NoError(t, err, name)
		require.Equal(t, want, v, name)
	}

	for name, p := range map[string]map[string]any{
		"nil":   nil,
		"empty": {},
		"other": {"foo": "bar"},
	} {
		_, _, err := a.ViewerFromInitPayload(p)
		require.ErrorIs(t, err, auth.ErrMissingToken, name)
		require.NotErrorIs(t, err, auth.ErrInvalidToken, name)
	}

	for name, p := range map[string]map[string]any{
		"no bearer scheme":   {"Authorization": tok},
		"not a string":       {"Authorization": 42},
		"token not a string": {"token": []any{tok}},
		"empty token":        {"authToken": ""},
		"bad token":          {"token": "nope"},
		"bad authorization":  {"Authorization": "Bearer nope"},
	} {
		v, _, err := a.ViewerFromInitPayload(p)
		require.ErrorIs(t, err, auth.ErrInvalidToken, name)
		require.Equal(t, viewer.Viewer{}, v, name)
	}
}
