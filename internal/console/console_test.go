package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	built := fstest.MapFS{
		"index.html":           {Data: []byte(`<!doctype html><script type="module" src="/assets/index-abc.js"></script>`)},
		"assets/index-abc.js":  {Data: []byte(`console.log(1)`)},
		"assets/style-abc.css": {Data: []byte(`body{}`)},
		"favicon.svg":          {Data: []byte(`<svg/>`)},
	}
	empty := fstest.MapFS{}
	cases := []struct {
		name       string
		fsys       fstest.MapFS
		path       string
		wantStatus int
		wantBody   string
		wantCache  string
		wantLoc    string
	}{
		{"index", built, "/", 200, "/assets/index-abc.js", "no-cache", ""},
		{"index by name", built, "/index.html", 301, "", "", "./"},
		{"asset", built, "/assets/index-abc.js", 200, "console.log", "public, max-age=31536000, immutable", ""},
		{"missing asset", built, "/assets/nope.js", 404, "", "", ""},
		{"icon", built, "/favicon.svg", 200, "<svg/>", "", ""},
		{"old address", built, "/zopday", 301, "", "", "/"},
		{"old address below", built, "/zopday/jobs", 301, "", "", "/"},
		{"not built", empty, "/", 200, "npm run build", "no-store", ""},
		{"not built asset", empty, "/assets/index-abc.js", 404, "", "", ""},
		{"api untouched", built, "/api/anything", 404, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			Mount(mux, c.fsys)
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
			if rec.Code != c.wantStatus {
				t.Fatalf("GET %s = %d, want %d", c.path, rec.Code, c.wantStatus)
			}
			if !strings.Contains(rec.Body.String(), c.wantBody) {
				t.Errorf("GET %s body %q lacks %q", c.path, rec.Body.String(), c.wantBody)
			}
			if got := rec.Header().Get("Cache-Control"); c.wantCache != "" && got != c.wantCache {
				t.Errorf("GET %s Cache-Control = %q, want %q", c.path, got, c.wantCache)
			}
			if got := rec.Header().Get("Location"); got != c.wantLoc {
				t.Errorf("GET %s Location = %q, want %q", c.path, got, c.wantLoc)
			}
			if c.wantStatus == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
				t.Errorf("GET %s has no same-origin CSP: %q", c.path, rec.Header().Get("Content-Security-Policy"))
			}
		})
	}
}
