// Package console tests the web console in a real browser: headless chromium from Debian,
// driven over the DevTools protocol (chromedp), against a whole Groundwork server (app.Run on
// SQLite with the local provider, which runs a real PostgreSQL). Every screen is checked with
// axe-core; screenshots go to the test's artifact directory (go test -artifacts -outputdir=DIR).
package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/provider/local/localtest"
)

// startServer runs Groundwork and, before it stops, tears down every job still holding a local
// server process, so a failed test leaves no PostgreSQL running.
func startServer(t *testing.T) *apptest.Server {
	t.Helper()
	s := apptest.Start(t, app.Options{DataDir: localtest.DataDir(t)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var list struct{ Data []job.Job }
		if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs?limit=500", nil, &list); err != nil {
			t.Errorf("cleanup: list jobs: %v", err)
			return
		}
		for _, j := range list.Data {
			if j.Status == job.StatusDeleted || j.Status == job.StatusCancelled || j.Status == job.StatusDraft {
				continue
			}
			var out job.Job
			_ = s.Client.Do(ctx, http.MethodDelete, "/api/provisioning-jobs/"+j.ID, nil, &out)
			for ctx.Err() == nil {
				if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+j.ID, nil, &out); err != nil ||
					out.Status == job.StatusDeleted || out.Status == job.StatusCancelled || out.Status == job.StatusFailed {
					break
				}
				time.Sleep(200 * time.Millisecond) // polling a condition; the deadline is ctx's
			}
		}
	})
	return s
}

// TestConsoleProvisionsPostgres walks the wizard for a local PostgreSQL as a person would and
// follows it to completed without a reload, creates a database, reveals the password, reads
// the audit log, cancels a second job and tears the first one down.
func TestConsoleProvisionsPostgres(t *testing.T) {
	requireBuiltConsole(t)
	localtest.RequireEngine(t, datastore.EnginePostgres)
	s := startServer(t)
	_, tab := browser(t, 1280, 800)
	p := newPage(t, tab, t.ArtifactDir())

	// Sign in: a wrong token is refused on the form; the admin token opens the jobs list.
	p.do(20*time.Second, "open console", chromedp.Navigate(s.URL+"/zopday"), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.accessible("sign-in")
	p.screenshot("00-sign-in")
	p.do(10*time.Second, "wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "gw_wrong_token_0000000000000000000000"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(".error")))
	if got := p.text(".error"); !strings.Contains(got, "not valid") {
		t.Errorf("wrong token: the form says %q, want it to say the token is not valid", got)
	}
	p.clear("#token")
	p.do(10*time.Second, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), s.Token),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(`//h1[normalize-space()='Provisioning jobs']`))
	p.accessible("jobs list (empty)")

	// Step 1: the resource types are the catalog's.
	p.clickText("New resource")
	p.do(10*time.Second, "wizard step 1", chromedp.WaitVisible(`//h2[contains(., 'Step 1')]`))
	p.do(10*time.Second, "types offered", chromedp.WaitVisible(chromedp.CSS("#type-managed-resource-postgres")))
	var offered []string
	offered = evalJS[[]string](p, `[...document.querySelectorAll('.cards label')].map(l => l.textContent)`)
	for _, want := range []string{"PostgreSQL database server", "MySQL database server", "Redis cache", "Kubernetes cluster", "VM pool", "Network", "Container registry", "DNS zone", "Helm component"} {
		if !contains(offered, want) {
			t.Errorf("step 1 offers %q, want %q among them", offered, want)
		}
	}
	var nextDisabled bool
	nextDisabled = evalJS[bool](p, `[...document.querySelectorAll('.wizard-nav button')].find(b => b.textContent === 'Next').disabled`)
	if !nextDisabled {
		t.Error("step 1: Next is enabled before a type is chosen")
	}
	p.do(5*time.Second, "choose postgres", chromedp.Click(chromedp.CSS(`#type-managed-resource-postgres`)))
	p.accessible("wizard step 1")
	p.screenshot("01-wizard-type")
	p.clickText("Next")

	// Step 2: no space yet; make a local one in place, and it is selected.
	p.do(10*time.Second, "wizard step 2", chromedp.WaitVisible(chromedp.CSS(`#new-space`)))
	p.do(10*time.Second, "create space", chromedp.SendKeys(chromedp.CSS("#new-space"), "console-dev"), chromedp.Click(`//button[normalize-space()='Create space']`),
		chromedp.WaitVisible(`//label[contains(., 'console-dev — local, local')]`))
	var spaceChecked bool
	spaceChecked = evalJS[bool](p, `document.querySelector('input[name=space]:checked') !== null`)
	if !spaceChecked {
		t.Error("step 2: the space made in place is not selected")
	}
	p.accessible("wizard step 2")
	p.screenshot("02-wizard-space")
	p.clickText("Next")

	// Step 3: the space's networks are discovered (a local space has the loopback) and offered
	// beside "create new", which is chosen until another is picked.
	p.do(10*time.Second, "wizard step 3", chromedp.WaitVisible(chromedp.CSS(`#net-new`)))
	p.do(10*time.Second, "discovered network", chromedp.WaitVisible(`//label[contains(., '127.0.0.0/8')]`))
	var newChecked bool
	newChecked = evalJS[bool](p, `document.querySelector('#net-new').checked`)
	if !newChecked {
		t.Error("step 3: 'create new' is not chosen")
	}
	p.accessible("wizard step 3")
	p.screenshot("03-wizard-network")
	p.clickText("Next")

	// Step 4: the form comes from the type's JSON Schema, defaults filled in.
	p.do(10*time.Second, "wizard step 4", chromedp.WaitVisible(chromedp.CSS(`#cfg-name`)))
	var defaults map[string]string
	defaults = evalJS[map[string]string](p, `({storage: document.querySelector('#cfg-allocatedStorageGB').value, retention: document.querySelector('#cfg-backupRetentionDays').value, engine: document.querySelector('#cfg-engine').value, multiAZ: String(document.querySelector('#cfg-multiAZ').checked)})`)
	if want := map[string]string{"storage": "20", "retention": "7", "engine": "postgres", "multiAZ": "false"}; !equalMaps(defaults, want) {
		t.Errorf("step 4 defaults = %v, want %v", defaults, want)
	}
	// A bad name goes to the server, whose field error comes back inline on this step.
	p.do(5*time.Second, "bad name", chromedp.SendKeys(chromedp.CSS("#cfg-name"), "Bad_Name"))
	p.clickText("Next")
	p.do(10*time.Second, "review", chromedp.WaitVisible(`//h2[contains(., 'Step 5')]`))
	p.planned()
	p.clickText("Provision")
	p.do(10*time.Second, "inline error", chromedp.WaitVisible(chromedp.CSS(`#cfg-name-error`)))
	if got := p.text("#cfg-name-error"); !strings.Contains(got, "does not match pattern") {
		t.Errorf("step 4 inline error for a bad name = %q, want the server's pattern message", got)
	}
	var invalid string
	invalid = evalJS[string](p, `document.querySelector('#cfg-name').getAttribute('aria-invalid')`)
	if invalid != "true" {
		t.Errorf("the bad name's input has aria-invalid=%q, want true", invalid)
	}
	p.accessible("wizard step 4 with a field error")
	p.screenshot("04-wizard-config-error")
	p.clear("#cfg-name")
	p.do(5*time.Second, "good name", chromedp.SendKeys(chromedp.CSS("#cfg-name"), "orders-db"))
	p.screenshot("04-wizard-config")
	p.clickText("Next")

	// Step 5: the review shows the choices and the server's plan: its steps and the monthly
	// cost, which for a local space is one known line of nothing.
	p.do(10*time.Second, "review", chromedp.WaitVisible(chromedp.CSS(`.plan-steps`)))
	if got := p.text(".plan-steps"); !strings.Contains(got, "create_server") {
		t.Errorf("the plan's steps %q lack create_server", got)
	}
	if got := p.text(`[aria-label="Monthly cost"]`); !strings.Contains(got, "local: no cloud cost") || !strings.Contains(got, "price book of") {
		t.Errorf("the cost table %q lacks the local line or the price book's date", got)
	}
	// A local PostgreSQL calls no cloud: the review says so rather than leaving the IAM
	// operations and the policy out (an AWS space's are checked in TestConsoleAWSReviewAndVMPool).
	if got := p.text(`[data-iam]`); !strings.Contains(got, "None: this plan calls no cloud API (local)") {
		t.Errorf("the review's IAM operations read %q, want none for a local space", got)
	}
	if got := p.text(`[data-policy]`); !strings.Contains(got, "No policy to grant") {
		t.Errorf("the review's policy reads %q, want none to grant", got)
	}
	review := p.text(".summary")
	for _, want := range []string{"PostgreSQL database server", "console-dev (local, local)", "create new", "datastore", "orders-db"} {
		if !strings.Contains(review, want) {
			t.Errorf("review summary %q lacks %q", review, want)
		}
	}
	p.accessible("wizard step 5")
	p.screenshot("05-wizard-review")

	// Provision; the job page follows the event stream. A marker on window shows no reload.
	evalJS[any](p, `window.__noReload = true`)
	p.clickText("Provision")
	p.do(10*time.Second, "job page", chromedp.WaitVisible(chromedp.CSS(`.steps`)))
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st string
		st = evalJS[string](p, `document.querySelector('h1 .status').textContent`)
		seen[st] = true
		if st == "completed" || st == "failed" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // sampling what a person would see; bounded by deadline
	}
	if !seen["completed"] {
		t.Fatalf("job page statuses seen %v, want completed", seen)
	}
	if !seen["queued"] && !seen["running"] {
		t.Errorf("job page statuses seen %v: the page never showed the job before it completed", seen)
	}
	var same bool
	same = evalJS[bool](p, `window.__noReload === true`)
	if !same {
		t.Error("the page reloaded to show completion; it must follow the stream")
	}
	var steps []map[string]string
	steps = evalJS[[]map[string]string](p, `[...document.querySelectorAll('.steps tbody tr')].map(r => ({name: r.cells[0].textContent, status: r.cells[1].textContent, attempts: r.cells[2].textContent, duration: r.cells[3].textContent}))`)
	if len(steps) == 0 {
		t.Fatal("the job page shows no steps")
	}
	for _, s := range steps {
		if s["status"] != "done" || s["attempts"] < "1" || s["duration"] == "—" {
			t.Errorf("step %v: want done after an attempt or more, with a duration", s)
		}
	}
	p.accessible("job detail (completed)")
	p.screenshot("06-job-detail")

	// Create a database on it.
	p.do(10*time.Second, "create database", chromedp.SendKeys(chromedp.CSS("#db-name"), "orders"), chromedp.SendKeys(chromedp.CSS("#db-owner"), "orders_app"),
		chromedp.Click(`//button[normalize-space()='Create database']`))
	p.waitFor(time.Minute, "database ready", `(() => { const r = document.querySelector('tr[data-database=orders]'); return !!r && r.textContent.includes('ready'); })()`)

	// A connection to it, and its password revealed after a confirmation.
	p.clickText("New connection")
	p.do(10*time.Second, "connection", chromedp.WaitVisible(`//button[normalize-space()='Reveal password…']`))
	p.clickText("Reveal password…")
	p.clickText("Yes, reveal")
	p.do(10*time.Second, "revealed", chromedp.WaitVisible(chromedp.CSS(".secret-value")))
	var pw string
	pw = evalJS[string](p, `document.querySelector('.secret-value').value`)
	if len(pw) < 16 {
		t.Errorf("revealed password has %d characters, want a real one", len(pw))
	}
	p.accessible("job detail with a database and a revealed secret")
	p.screenshot("07-job-datastore")

	// The audit log shows the reveal, and filters by action.
	p.do(10*time.Second, "audit", chromedp.Navigate(s.URL+"/#/audit"), chromedp.WaitVisible(chromedp.CSS(`#a-action`)))
	p.do(10*time.Second, "filter audit", chromedp.SendKeys(chromedp.CSS("#a-action"), "secret.reveal"), chromedp.Click(`//button[normalize-space()='Apply filters']`))
	p.waitFor(10*time.Second, "filtered audit", `(() => { const rows = [...document.querySelectorAll('tbody tr')]; return rows.length > 0 && rows.every(r => r.textContent.includes('secret.reveal')); })()`)
	p.accessible("audit log")
	p.screenshot("08-audit")
	p.do(10*time.Second, "catalog", chromedp.Navigate(s.URL+"/#/catalog"), chromedp.WaitVisible(`//h2[normalize-space()='Resource types']`))
	p.waitFor(10*time.Second, "components listed", `document.querySelectorAll('button[aria-label^="Install "]').length > 0`)
	p.accessible("catalog")
	// A component installed into a space that is not a registered cluster: the server's refusal
	// is shown on the form.
	p.do(10*time.Second, "install form", chromedp.Click(chromedp.CSS(`button[aria-label^="Install "]`)), chromedp.WaitVisible(chromedp.CSS("#inst-space")))
	p.clickText("Install")
	p.do(10*time.Second, "install refused", chromedp.WaitVisible(chromedp.CSS("form.inline-form .error")))
	if got := p.text("#inst-space-error"); !strings.Contains(got, "register a cluster") {
		t.Errorf("installing into a local space shows %q under the space, want the server's reason", got)
	}
	p.accessible("component install refused")
	p.screenshot("09-catalog-install-refused")

	// The jobs list filters by status.
	p.do(10*time.Second, "jobs list", chromedp.Navigate(s.URL+"/#/jobs"), chromedp.WaitVisible(`//a[normalize-space()='orders-db']`))
	p.choose("#f-status", "failed")
	p.do(10*time.Second, "no failed jobs", chromedp.WaitVisible(`//p[normalize-space()='No jobs match.']`))
	p.choose("#f-status", "completed")
	p.do(10*time.Second, "completed jobs", chromedp.WaitVisible(`//a[normalize-space()='orders-db']`))
	p.accessible("jobs list filtered")

	// A draft: saved from the wizard, resumed at its review, provisioned, then cancelled while it runs.
	p.clickText("New resource")
	p.do(10*time.Second, "types", chromedp.Click(chromedp.CSS("#type-managed-resource-postgres"), chromedp.NodeVisible))
	p.clickText("Next")
	p.do(10*time.Second, "space", chromedp.Click(chromedp.CSS("input[name=space]"), chromedp.NodeVisible))
	p.clickText("Next")
	p.do(10*time.Second, "network", chromedp.WaitVisible(chromedp.CSS("#net-new")))
	p.clickText("Next")
	p.do(10*time.Second, "config", chromedp.SendKeys(chromedp.CSS("#cfg-name"), "cancel-me"))
	p.clickText("Next")
	p.planned()
	p.clickText("Save as draft")
	p.waitFor(10*time.Second, "draft saved", `(() => { const s = document.querySelector('h1 .status'); return !!s && s.textContent === 'draft'; })()`)
	p.clickText("Resume draft")
	p.do(10*time.Second, "resumed at review", chromedp.WaitVisible(`//h2[contains(., 'Step 5')]`))
	if got := p.text(".summary"); !strings.Contains(got, "cancel-me") {
		t.Errorf("the resumed draft's review shows %q, want its name cancel-me", got)
	}
	p.planned()
	p.clickText("Provision")
	p.do(10*time.Second, "second job", chromedp.WaitVisible(`//button[normalize-space()='Cancel job']`))
	p.clickText("Cancel job")
	p.waitFor(time.Minute, "cancelled", `document.querySelector('h1 .status').textContent === 'cancelled'`)

	// A failed job shows its failure's class and fix hint, and Retry runs it again live.
	var sp struct{ Data []struct{ ID string } }
	if err := s.Client.Do(context.Background(), http.MethodGet, "/api/spaces", nil, &sp); err != nil || len(sp.Data) == 0 {
		t.Fatalf("spaces: %v %v", sp, err)
	}
	var bad job.Job
	req := map[string]any{"kind": "datastore", "spaceID": sp.Data[0].ID, "name": "wrong-version",
		"config": map[string]any{"engine": "postgres", "name": "wrong-version", "version": "99"}}
	if err := s.Client.Do(context.Background(), http.MethodPost, "/api/provisioning-jobs", req, &bad); err != nil {
		t.Fatal(err)
	}
	p.do(10*time.Second, "failed job", chromedp.Navigate(s.URL+"/#/jobs/"+bad.ID), chromedp.WaitVisible(`.steps`))
	p.waitFor(time.Minute, "failure shown", `!!document.querySelector('.failure')`)
	failure := p.text(".failure")
	for _, want := range []string{"validate", "user_action", "version 99", "Request version"} {
		if !strings.Contains(failure, want) {
			t.Errorf("the failure reads %q, want %q in it", failure, want)
		}
	}
	p.accessible("failed job")
	p.screenshot("10-job-failed")
	// A retry runs the step again (its attempts count from zero again): a new finish time on
	// the same page shows the second run.
	firstEnd := evalJS[string](p, `document.querySelector('tr[data-step=validate]').dataset.finished`)
	p.clickText("Retry")
	p.waitFor(time.Minute, "second run failed", fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-step=validate]'); return document.querySelector('h1 .status').textContent === 'failed' && !!r && r.dataset.finished !== %q && r.dataset.finished !== ''; })()`, firstEnd))

	// Tear down the first job with its name typed as confirmation.
	p.do(10*time.Second, "jobs list", chromedp.Navigate(s.URL+"/#/jobs"), chromedp.Click(`//a[normalize-space()='orders-db']`))
	p.clickText("Tear down…")
	p.do(5*time.Second, "confirm form", chromedp.WaitVisible(chromedp.CSS("#confirm-name")))
	var teardownDisabled bool
	teardownDisabled = evalJS[bool](p, `document.querySelector('form.confirm button[type=submit]').disabled`)
	if !teardownDisabled {
		t.Error("Tear down is enabled before the name is typed")
	}
	p.accessible("teardown confirmation")
	p.do(5*time.Second, "type name", chromedp.SendKeys(chromedp.CSS("#confirm-name"), "orders-db"))
	p.clickText("Tear down")
	p.waitFor(time.Minute, "deleted", `document.querySelector('h1 .status').textContent === 'deleted'`)
	// The wizard at a phone's width: nothing wider than the screen, and still accessible.
	p.do(10*time.Second, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(s.URL+"/#/new"), chromedp.WaitVisible(chromedp.CSS("#type-managed-resource-postgres")))
	p.fitsWidth("wizard at 390px")
	p.accessible("wizard at 390px")
	p.screenshot("11-wizard-390px")
	t.Logf("axe-core ran on %d screens", p.checks)
}

// TestConsoleViewer: a Viewer's console offers no create button or wizard, and the API refuses
// the create the page is forced to send.
func TestConsoleViewer(t *testing.T) {
	requireBuiltConsole(t)
	s := apptest.Start(t, app.Options{})
	ctx := context.Background()
	viewerToken := tokenFor(t, s, "viewer@example.com", "role_viewer")
	var sp struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]string{"name": "v", "provider": "local", "region": "local"}, &sp); err != nil {
		t.Fatal(err)
	}
	var draft struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"kind": "datastore", "spaceID": sp.ID, "name": "seen", "draft": true,
		"config": map[string]any{"engine": "postgres", "name": "seen"}}, &draft); err != nil {
		t.Fatal(err)
	}
	var pool struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"kind": "vm_pool", "spaceID": awsSpace(t, s, "aws"), "name": "pool", "draft": true,
		"config": map[string]any{"name": "pool", "instanceType": "t3.micro"}}, &pool); err != nil {
		t.Fatal(err)
	}
	var rem struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/remediation-jobs", map[string]any{"recommendationID": "rec_idle_vm", "subjectType": "resource",
		"subjectID": "vm-idle-1", "spaceID": sp.ID, "action": "pause", "resourceType": "vm"}, &rem); err != nil {
		t.Fatal(err)
	}
	_, tab := browser(t, 390, 844)
	p := newPage(t, tab, t.ArtifactDir())
	// Headless chromium's window is at least 500px wide; a phone's viewport is emulated.
	p.do(10*time.Second, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	// Signed in with the keyboard alone: Tab reaches the token field first, Enter submits.
	p.do(20*time.Second, "open console", chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.do(5*time.Second, "tab", chromedp.KeyEvent("\t"))
	if id := evalJS[string](p, `document.activeElement.id`); id != "token" {
		t.Errorf("the first Tab focuses %q, want the token field", id)
	}
	p.do(20*time.Second, "sign in", chromedp.KeyEvent(viewerToken), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`//h1[normalize-space()='Provisioning jobs']`))
	links := p.buttons()
	if !contains(links, "Remediations") {
		t.Errorf("a Viewer, who may view remediation workflows, has no Remediations link (links and buttons: %q)", links)
	}
	for _, bad := range []string{"New resource", "Audit log"} {
		if contains(links, bad) {
			t.Errorf("a Viewer sees %q (links and buttons: %q)", bad, links)
		}
	}
	p.accessible("jobs list as a Viewer at 390px")
	p.screenshot("viewer-jobs-390px")
	p.do(10*time.Second, "job page", chromedp.Navigate(s.URL+"/#/jobs/"+draft.ID), chromedp.WaitVisible(`.steps`))
	links = p.buttons()
	for _, bad := range []string{"Delete…", "Resume draft", "Retry", "Cancel job"} {
		if contains(links, bad) {
			t.Errorf("a Viewer's job page offers %q (links and buttons: %q)", bad, links)
		}
	}
	if got := p.buttons(); contains(got, "Attach load balancer…") || contains(got, "Resize…") {
		t.Errorf("a Viewer's job page offers VM operations: %q", got)
	}
	p.fitsWidth("job page as a Viewer at 390px")
	p.accessible("job page as a Viewer at 390px")
	p.screenshot("viewer-job-390px")
	// The VM operations of a pool are not offered to a Viewer either.
	p.do(10*time.Second, "vm pool", chromedp.Navigate(s.URL+"/#/jobs/"+pool.ID), chromedp.WaitVisible(`.steps`))
	if got := p.buttons(); contains(got, "Attach load balancer…") || contains(got, "Detach load balancer…") || contains(got, "Resize…") {
		t.Errorf("a Viewer's VM pool page offers VM operations: %q", got)
	}
	// A Viewer sees remediation workflows but cannot decide or cancel them; the page says why.
	p.do(10*time.Second, "remediation", chromedp.Navigate(s.URL+"/#/remediations/"+rem.ID), chromedp.WaitVisible(`//h2[normalize-space()='Steps']`))
	p.waitFor(time.Minute, "at the gate", `document.querySelector('h1 .status').textContent === 'awaiting_user'`)
	p.do(10*time.Second, "why not", chromedp.WaitVisible(`//p[contains(., 'may not decide it')]`))
	if got := p.buttons(); contains(got, "Approve…") || contains(got, "Reject…") || contains(got, "Cancel workflow…") {
		t.Errorf("a Viewer's remediation page offers %q", got)
	}
	p.fitsWidth("remediation as a Viewer at 390px")
	p.accessible("remediation as a Viewer at 390px")
	p.screenshot("viewer-remediation-390px")
	p.do(10*time.Second, "wizard by address", chromedp.Navigate(s.URL+"/#/new"), chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)))
	if got := p.text(`[role=alert]`); !strings.Contains(got, "may not create") {
		t.Errorf("the wizard for a Viewer says %q, want that the token may not create", got)
	}
	var status int
	status = evalJS[int](p, `fetch('/api/provisioning-jobs', {method: 'POST', headers: {'Authorization': 'Bearer ' + sessionStorage.getItem('groundwork.token'), 'Content-Type': 'application/json'},
		body: JSON.stringify({kind: 'datastore', spaceID: `+jsString(sp.ID)+`, name: 'forced', config: {engine: 'postgres', name: 'forced'}})}).then(r => r.status)`)
	if status != http.StatusForbidden {
		t.Errorf("a Viewer's forced create answered %d, want 403", status)
	}
}

func jsString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
