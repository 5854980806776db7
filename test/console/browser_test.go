package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/groundworkhq/groundwork/internal/console"
)

// chromiumPath finds Debian's chromium (scripts/setup.d/60-console.sh installs it). Missing, it
// skips the test, or fails it under CI=true, where the setup script must have put it there.
func chromiumPath(tb testing.TB) string {
	tb.Helper()
	candidates := []string{"chromium", "/usr/bin/chromium"}
	if p := os.Getenv("GROUNDWORK_CHROMIUM"); p != "" {
		candidates = []string{p} // chosen explicitly: no fallback
	}
	for _, p := range candidates {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	missing(tb, fmt.Sprintf("chromium is not installed (looked for %v); scripts/setup.d/60-console.sh installs it", candidates))
	return ""
}

// requireBuiltConsole fails (CI) or skips when this binary embeds no console build.
func requireBuiltConsole(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(tb), "web", "node_modules", "axe-core", "axe.min.js")); err != nil {
		missing(tb, "web/node_modules is not installed (cd web && npm ci)")
	}
	b, err := fs.ReadFile(console.Embedded(), "index.html")
	if err != nil || !strings.Contains(string(b), "/assets/") {
		missing(tb, "the console is not built into this binary (scripts/setup.d/60-console.sh, or cd web && npm run build)")
	}
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatal(why)
	}
	tb.Skip(why)
}

func repoRoot(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// browser starts a headless chromium with an empty profile and returns a tab's context.
func browser(tb testing.TB, width, height int) (context.Context, context.Context) {
	tb.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(tb)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(width, height),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	tb.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(tab); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return alloc, tab
}

// page drives one tab with a deadline per action, an axe-core check per screen and screenshots.
type page struct {
	t      *testing.T
	ctx    context.Context
	axe    string
	shots  string
	checks int
}

func newPage(t *testing.T, ctx context.Context, shots string) *page {
	t.Helper()
	axe, err := os.ReadFile(filepath.Join(repoRoot(t), "web", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	return &page{t: t, ctx: ctx, axe: string(axe), shots: shots}
}

// do performs steps, failing the test if they do not finish within d.
func (p *page) do(d time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, loaded(d))
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.failed()
		p.t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value, failing the test if it does not within d.
func get[T any](p *page, d time.Duration, what string, a chromedp.Action[T]) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, loaded(d))
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		p.failed()
		p.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// loaded stretches a step's deadline for a machine that runs the other test packages beside
// the browser (CI runs two at a time, and the AWS suite beside this one starved a 10 s wizard
// step once). The deadlines only catch a page that hangs; they assert no speed.
func loaded(d time.Duration) time.Duration { return 3 * d }

// failed keeps a screenshot of the page as it was when a step failed.
func (p *page) failed() {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		path := filepath.Join(p.shots, "failure.png")
		if os.WriteFile(path, png, 0o644) == nil {
			p.t.Logf("screenshot of the failure: %s", path)
		}
	}
}

// text is the visible text of the first element sel (CSS) matches.
func (p *page) text(sel string) string {
	p.t.Helper()
	return strings.TrimSpace(get(p, 10*time.Second, "read "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible)))
}

// evalJS evaluates js in the page (awaiting a promise) and decodes its value as T.
func evalJS[T any](p *page, js string) T {
	p.t.Helper()
	return get(p, 15*time.Second, "evaluate "+js, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// clear empties an input as a person would, so that the page's input handler sees it.
func (p *page) clear(sel string) {
	p.t.Helper()
	evalJS[bool](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel))
}

// choose picks value in a select and tells the page, as a person's choice would.
func (p *page) choose(sel, value string) {
	p.t.Helper()
	evalJS[bool](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, sel, value))
}

// fitsWidth fails when the page scrolls sideways (a table may scroll inside its own region).
func (p *page) fitsWidth(screen string) {
	p.t.Helper()
	if w := evalJS[[]int](p, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		p.t.Errorf("%s is %dpx wide in a %dpx viewport", screen, w[0], w[1])
	}
}

// waitFor polls a JavaScript condition until it is true or d passes.
func (p *page) waitFor(d time.Duration, what, cond string) {
	p.t.Helper()
	get(p, d, "wait for "+what, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond)))
}

// clickText clicks the first visible button or link whose text is label.
func (p *page) clickText(label string) {
	p.t.Helper()
	sel := fmt.Sprintf(`//*[self::button or self::a][normalize-space()=%q]`, label)
	p.do(15*time.Second, "click "+label, chromedp.Click(sel, chromedp.NodeVisible))
}

type violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		HTML   string `json:"html"`
		Target []any  `json:"target"`
	} `json:"nodes"`
}

// accessible runs axe-core in the page and fails on serious or critical violations.
func (p *page) accessible(screen string) {
	p.t.Helper()
	var loaded bool
	loaded = evalJS[bool](p, `typeof window.axe === 'object'`)
	if !loaded {
		evalJS[bool](p, p.axe+";\ntrue")
	}
	var vs []violation
	vs = evalJS[[]violation](p, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => ({html: n.html, target: n.target}))})))`)
	p.checks++
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			b, _ := json.Marshal(v.Nodes)
			p.t.Errorf("axe on %s: %s %s (%s): %s", screen, v.Impact, v.ID, v.Help, b)
		}
	}
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	png := get(p, 20*time.Second, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
}
