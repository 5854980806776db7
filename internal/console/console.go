// Package console serves the web console: a single-page app built from web/ with Vite into
// dist/app and embedded in the binary, so an air-gapped server needs nothing else. A checkout
// that has not built it still compiles and serves a page that says how to build it.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var embedded embed.FS

// Embedded is the console built into this binary (dist/app), possibly empty.
func Embedded() fs.FS {
	sub, err := fs.Sub(embedded, "dist/app")
	if err != nil {
		panic(err) // fs.Sub fails only on an invalid path, which "dist/app" is not
	}
	return sub
}

// contentSecurityPolicy allows only this origin: the console loads no CDN, font or script from
// elsewhere, and the API it calls is same-origin.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Handler serves the app in fsys: index.html at "/", hashed assets under /assets/ (cached for
// good, since a new build has new names), and the build instructions when fsys has no index.html.
func Handler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		if _, err := fs.Stat(fsys, "index.html"); err != nil {
			if name != "index.html" {
				http.NotFound(w, r)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Cache-Control", "no-store")
			_, _ = w.Write([]byte(notBuiltPage))
			return
		}
		if st, err := fs.Stat(fsys, name); err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		if name == "index.html" {
			// A new build must be picked up at once; the assets it names are immutable.
			h.Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, fsys, "index.html")
			return
		}
		if strings.HasPrefix(name, "assets/") {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
		files.ServeHTTP(w, r)
	})
}

// Mount serves the console at / on mux, and sends the old /zopday address there.
func Mount(mux interface {
	Handle(pattern string, h http.Handler)
}, fsys fs.FS) {
	h := Handler(fsys)
	mux.Handle("GET /{$}", h)
	mux.Handle("GET /index.html", h)
	mux.Handle("GET /assets/", h)
	mux.Handle("GET /favicon.svg", h)
	toRoot := http.RedirectHandler("/", http.StatusMovedPermanently)
	mux.Handle("GET /zopday", toRoot)
	mux.Handle("GET /zopday/", toRoot)
}

const notBuiltPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Groundwork console not built</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>The Groundwork console is not built into this binary</h1>
<p>The API under <code>/api</code> works; only the web console is missing. Build it and rebuild
the binary:</p>
<pre>cd web &amp;&amp; npm ci &amp;&amp; go run ../cmd/groundwork openapi &gt; openapi.json &amp;&amp; npm run build
cd .. &amp;&amp; go build -o bin/groundwork ./cmd/groundwork</pre>
<p><code>scripts/run.sh</code> does both (scripts/setup.d/60-console.sh).</p></main></body></html>
`
