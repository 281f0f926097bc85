package panel

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServesIndexAtRoot(t *testing.T) {
	h := Handler()
	resp := get(t, h, http.MethodGet, "/", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	b := body(t, resp)
	if !strings.Contains(b, `<meta name="adal-panel"`) || !strings.Contains(b, `src="/assets/app.js"`) {
		t.Errorf("GET / is not the panel's index.html:\n%s", b)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "connect-src 'self' ws://example.com wss://example.com", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options: nosniff")
	}
}

func TestServesAssetsWithContentTypes(t *testing.T) {
	h := Handler()
	want := map[string]string{
		"/assets/app.js":      "text/javascript; charset=utf-8",
		"/assets/gql.js":      "text/javascript; charset=utf-8",
		"/assets/ui.js":       "text/javascript; charset=utf-8",
		"/assets/queries.js":  "text/javascript; charset=utf-8",
		"/assets/app.css":     "text/css; charset=utf-8",
		"/assets/favicon.svg": "image/svg+xml",
	}
	for target, ct := range want {
		resp := get(t, h, http.MethodGet, target, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", target, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != ct {
			t.Errorf("GET %s: Content-Type = %q, want %q", target, got, ct)
		}
		file := strings.TrimPrefix(target, "/assets/")
		src, err := fs.ReadFile(AssetsFS(), file)
		if err != nil {
			t.Fatal(err)
		}
		if b := body(t, resp); b != string(src) {
			t.Errorf("GET %s: body differs from the embedded file", target)
		}
	}
	// Every embedded file is reachable and typed.
	err := fs.WalkDir(AssetsFS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		resp := get(t, h, http.MethodGet, "/assets/"+p, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") == "" {
			t.Errorf("GET /assets/%s = %d, Content-Type %q", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRevalidatesWithETag(t *testing.T) {
	h := Handler()
	first := get(t, h, http.MethodGet, "/assets/app.js", nil)
	etag := first.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if cc := first.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control = %q", cc)
	}
	again := get(t, h, http.MethodGet, "/assets/app.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET = %d, want 304", again.StatusCode)
	}
}

func TestUnknownPathsFallBackToIndex(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, http.MethodGet, "/", nil))
	// The handler answers whatever path the mux gives it; /graphql, /in/, /healthz and /metrics never reach it
	// in the server because the mux routes them first, but the handler itself must not special-case them.
	for _, target := range []string{"/servers", "/servers/12", "/requests/7?x=1", "/index.html", "/deep/ly/nested/", "/graphql", "/in/abc", "/healthz", "/metrics"} {
		resp := get(t, h, http.MethodGet, target, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", target, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type = %q", target, ct)
		}
		if b := body(t, resp); b != index {
			t.Errorf("GET %s did not serve index.html", target)
		}
	}
	if resp := get(t, h, http.MethodHead, "/servers", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /servers = %d", resp.StatusCode)
	}
}

func TestMissingAssetIs404(t *testing.T) {
	h := Handler()
	for _, target := range []string{"/assets/missing.js", "/assets/../../go.mod", "/assets/"} {
		resp := get(t, h, http.MethodGet, target, nil)
		if target == "/assets/../../go.mod" {
			// Cleaned to /go.mod: outside the assets, so it is the SPA, never a file from disk.
			if b := body(t, resp); !strings.Contains(b, "adal-panel") {
				t.Errorf("GET %s escaped the embedded files: %q", target, b)
			}
			continue
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", target, resp.StatusCode)
		}
	}
}

func TestRejectsWrites(t *testing.T) {
	resp := get(t, Handler(), http.MethodPost, "/", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405", resp.StatusCode)
	}
}

// TestMountedBesideTheAPI shows the intended wiring: the panel at "/" does not shadow the routes registered
// beside it.
func TestMountedBesideTheAPI(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range []string{"/graphql", "/in/", "GET /healthz", "GET /metrics"} {
		name := p
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api:"+name) })
	}
	mux.Handle("/", Handler())
	for target, want := range map[string]string{
		"/graphql": "api:/graphql", "/in/key/x": "api:/in/", "/healthz": "api:GET /healthz", "/metrics": "api:GET /metrics",
	} {
		if got := body(t, get(t, mux, http.MethodGet, target, nil)); got != want {
			t.Errorf("GET %s = %q, want %q", target, got, want)
		}
	}
	if got := body(t, get(t, mux, http.MethodGet, "/servers", nil)); !strings.Contains(got, "adal-panel") {
		t.Errorf("GET /servers through the mux is not the panel")
	}
}
