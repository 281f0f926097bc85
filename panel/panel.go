// Package panel is Adal's web panel: a single-page app of hand-written HTML, CSS and ES modules, embedded in
// the binary and served at "/". It talks to the process only through GraphQL — POST /graphql for queries and
// mutations, the graphql-transport-ws websocket on /graphql for live delivery updates — so it needs no Node
// toolchain, no build step and no network access beyond its own origin.
package panel

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var embedded embed.FS

// AssetsFS is the panel's static files (index.html, app.css, *.js, …), rooted at the assets directory.
func AssetsFS() fs.FS {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		panic(err) // the directory is embedded at build time; it cannot be missing
	}
	return sub
}

// contentTypes is fixed here rather than taken from the mime package, whose answers depend on the host's
// /etc/mime.types: a browser refuses an ES module served with anything but a JavaScript type.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the panel. Every path it is given gets an answer: the files are served under /assets/, a
// missing file there is a 404 (so a stale script reference fails loudly instead of receiving HTML), and any
// other path is the app's index.html, whose hash router takes it from there. The caller mounts it at
// "/" beside /graphql, /in/, /healthz and /metrics, which the mux routes elsewhere before it gets here.
func Handler() http.Handler {
	files := map[string]asset{}
	root := AssetsFS()
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = http.DetectContentType(body)
		}
		sum := sha256.Sum256(body)
		files["/assets/"+p] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	index, ok := files["/assets/index.html"]
	if !ok {
		panic("panel: index.html is not embedded")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		a, found := files[p]
		switch {
		case found:
		case p == "/assets" || strings.HasPrefix(p, "/assets/"):
			http.NotFound(w, r)
			return
		default:
			a = index
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		// Asset names carry no content hash, so browsers revalidate every time; the ETag makes that a 304.
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if a.contentType == index.contentType {
			h.Set("Content-Security-Policy", csp(r.Host))
			h.Set("X-Frame-Options", "DENY")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

// csp allows nothing but this origin: scripts, styles and images from the binary, GraphQL over fetch and the
// websocket. The websocket needs its ws:/wss: origin spelled out for browsers that do not map 'self' to it.
func csp(host string) string {
	connect := "'self'"
	if validHost(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

func validHost(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	for _, c := range host {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}
