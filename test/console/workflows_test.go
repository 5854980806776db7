package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
)

// awsSpace makes an AWS cloud account and a space on it. Nothing reaches AWS: the plan, the
// catalog and a draft need only the records, a draft never runs, and the account's endpoint is
// a closed local port, so the wizard's discovery fails at once (and says so).
func awsSpace(t *testing.T, s *apptest.Server, name string) string {
	t.Helper()
	return awsSpaceAt(t, s, name, "http://127.0.0.1:1")
}

// awsSpaceAt makes an AWS cloud account whose API endpoint is endpoint, and a space on it.
func awsSpaceAt(t *testing.T, s *apptest.Server, name, endpoint string) string {
	t.Helper()
	ctx := context.Background()
	var acc struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/cloud-accounts", map[string]any{"name": name, "provider": "aws", "region": "eu-west-1",
		"authMethod": "static_keys", "credentials": map[string]string{"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "not-a-real-key"},
		"config": map[string]string{"endpoint": endpoint}}, &acc); err != nil {
		t.Fatalf("create cloud account: %v", err)
	}
	var sp struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]any{"name": name, "provider": "aws", "region": "eu-west-1",
		"cloudAccountID": acc.ID}, &sp); err != nil {
		t.Fatalf("create space: %v", err)
	}
	return sp.ID
}

// tokenFor makes a user with the role and returns a token of theirs.
func tokenFor(t *testing.T, s *apptest.Server, email, role string) string {
	t.Helper()
	ctx := context.Background()
	if err := s.Client.Do(ctx, http.MethodPost, "/api/users", map[string]string{"email": email, "roleID": role}, nil); err != nil {
		t.Fatalf("create %s: %v", email, err)
	}
	var tok struct{ Secret string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/tokens", map[string]string{"email": email, "name": "console"}, &tok); err != nil {
		t.Fatalf("token of %s: %v", email, err)
	}
	return tok.Secret
}

// signIn opens the console and signs in with token.
func (p *page) signIn(url, token string) {
	p.t.Helper()
	p.do(20*time.Second, "open console", chromedp.Navigate(url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.do(20*time.Second, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(`//h1[normalize-space()='Provisioning jobs']`))
}

// planned waits until the review has its plan (or the server's refusal of it): the plan pushes
// the review's buttons down the page, and a click aimed before it lands would miss them.
func (p *page) planned() {
	p.t.Helper()
	p.waitFor(15*time.Second, "the plan", `!!document.querySelector('.plan-steps, [data-plan], .wizard-body .error')`)
}

// buttons lists the text of every link and button on the page.
func (p *page) buttons() []string {
	p.t.Helper()
	return evalJS[[]string](p, `[...document.querySelectorAll('a, button')].map(e => e.textContent.trim())`)
}

// TestConsoleAWSReviewAndVMPool walks the wizard for a VM pool on an AWS space to its review,
// which shows the server's plan for AWS: the IAM operations line by line, the least-privilege
// policy with its copy button, and the cost. Saved as a draft, the pool's page offers the VM
// operations (load balancer, resize) disabled with the reason until the job completes; a
// datastore's page has none.
func TestConsoleAWSReviewAndVMPool(t *testing.T) {
	requireBuiltConsole(t)
	s := apptest.Start(t, app.Options{})
	awsSpace(t, s, "aws-dev")
	_, tab := browser(t, 1280, 800)
	p := newPage(t, tab, t.ArtifactDir())
	p.signIn(s.URL, s.Token)

	p.clickText("New resource")
	p.do(10*time.Second, "choose vm pool", chromedp.Click(chromedp.CSS("#type-target-vm-pool"), chromedp.NodeVisible))
	p.clickText("Next")
	p.do(10*time.Second, "choose space", chromedp.Click(`//label[contains(., 'aws-dev — aws, eu-west-1')]`, chromedp.NodeVisible))
	p.clickText("Next")
	p.do(10*time.Second, "network", chromedp.WaitVisible(chromedp.CSS("#net-new")))
	p.clickText("Next")
	p.do(10*time.Second, "config", chromedp.SendKeys(chromedp.CSS("#cfg-name"), "web-pool"), chromedp.SendKeys(chromedp.CSS("#cfg-instanceType"), "t3.micro"))
	p.clickText("Next")

	p.do(10*time.Second, "review", chromedp.WaitVisible(chromedp.CSS(".iam-ops")))
	ops := evalJS[[]string](p, `[...document.querySelectorAll('.iam-ops li')].map(l => l.textContent.trim())`)
	for _, want := range []string{"ec2:RunInstances", "ec2:CreateVpc"} {
		if !contains(ops, want) {
			t.Errorf("the review's IAM operations %q lack %s", ops, want)
		}
	}
	if got := p.text(".plan-steps"); !strings.Contains(got, "IAM: ") || !strings.Contains(got, "ec2:RunInstances") {
		t.Errorf("the plan's steps %q do not say which step calls ec2:RunInstances", got)
	}
	policy := p.text("pre.policy")
	for _, want := range []string{`"Version"`, `"Effect": "Allow"`, "ec2:RunInstances"} {
		if !strings.Contains(policy, want) {
			t.Errorf("the policy document %q lacks %s", policy, want)
		}
	}
	if got := p.text(`[aria-label="Monthly cost"]`); !strings.Contains(got, "price book of") || !strings.Contains(got, "t3.micro") {
		t.Errorf("the cost table %q lacks the instance's line or the price book's date", got)
	}
	p.clickText("Copy policy")
	// The page says Copied. only when the browser's clipboard took the text (reading it back
	// needs a permission a headless tab is not given).
	p.waitFor(10*time.Second, "copied", `[...document.querySelectorAll('[aria-live=polite]')].some(e => e.textContent === 'Copied.')`)
	p.accessible("wizard step 5 on AWS")
	p.screenshot("aws-05-wizard-review")

	// The draft's page: the VM operations are there for a token that may update jobs, and
	// disabled with the reason while the pool is not completed.
	p.planned()
	p.clickText("Save as draft")
	p.do(10*time.Second, "vm pool section", chromedp.WaitVisible(`//h2[normalize-space()='VM pool operations']`))
	disabled := evalJS[map[string]bool](p, `Object.fromEntries([...document.querySelectorAll('.vm-ops button')].map(b => [b.textContent.trim(), b.disabled]))`)
	for _, b := range []string{"Attach load balancer…", "Detach load balancer…", "Resize…"} {
		if d, ok := disabled[b]; !ok || !d {
			t.Errorf("the draft pool's %q button: present %v, disabled %v; want present and disabled (buttons %v)", b, ok, d, disabled)
		}
	}
	if got := p.text(".vm-ops"); !strings.Contains(got, "need a completed job; this one is draft") {
		t.Errorf("the VM operations say %q, want the reason they are disabled", got)
	}
	p.accessible("VM pool draft")
	p.screenshot("aws-vm-pool-draft")
}

// TestConsoleRemediation runs remediation workflows on a local space, where a pause reaches
// its approval gate: one is rejected with a reason (after the server refused a reason that is
// too long, under the field), one approved (its pause then fails: nothing local has one), one
// cancelled, each read back from the page's steps, failure and timeline.
func TestConsoleRemediation(t *testing.T) {
	requireBuiltConsole(t)
	s := apptest.Start(t, app.Options{})
	ctx := context.Background()
	var sp struct{ ID string }
	if err := s.Client.Do(ctx, http.MethodPost, "/api/spaces", map[string]string{"name": "ops", "provider": "local", "region": "local"}, &sp); err != nil {
		t.Fatal(err)
	}
	start := func(subject string) string {
		var r struct{ ID string }
		if err := s.Client.Do(ctx, http.MethodPost, "/api/remediation-jobs", map[string]any{"recommendationID": "rec_idle_vm", "subjectType": "resource",
			"subjectID": subject, "spaceID": sp.ID, "action": "pause", "resourceType": "vm"}, &r); err != nil {
			t.Fatalf("start remediation of %s: %v", subject, err)
		}
		return r.ID
	}
	reject, approve, cancel := start("vm-reject"), start("vm-approve"), start("vm-cancel")

	_, tab := browser(t, 1280, 800)
	p := newPage(t, tab, t.ArtifactDir())
	p.signIn(s.URL, s.Token)
	p.clickText("Remediations")
	p.do(10*time.Second, "list", chromedp.WaitVisible(chromedp.CSS(`tr[data-remediation="`+reject+`"]`)))
	p.choose("#r-status", "awaiting_user")
	p.waitFor(time.Minute, "three at their gate", `document.querySelectorAll('tr[data-remediation]').length === 3 && [...document.querySelectorAll('tr[data-remediation]')].every(r => r.textContent.includes('awaiting_user'))`)
	if got := p.text(`tr[data-remediation="` + reject + `"]`); !strings.Contains(got, "pause vm vm-reject") || !strings.Contains(got, "pause-service@") {
		t.Errorf("the list's row reads %q, want the action, subject and template", got)
	}
	p.accessible("remediation list")
	p.screenshot("remediations-list")

	// Reject: the gate is shown with the steps after it; a reason over the limit comes back as
	// the server's error under the field, and a good one ends the workflow cancelled.
	p.do(10*time.Second, "open", chromedp.Click(chromedp.CSS(`tr[data-remediation="`+reject+`"] a`)), chromedp.WaitVisible(`//h2[normalize-space()='Approval needed: approval']`))
	if got := p.text(".gate"); !strings.Contains(got, "pause_service, validate") {
		t.Errorf("the gate says %q, want the steps it lets run", got)
	}
	if got := p.text(`tr[data-step=approval]`); !strings.Contains(got, "waiting") {
		t.Errorf("the approval step reads %q, want waiting", got)
	}
	p.accessible("remediation at its gate")
	p.screenshot("remediation-awaiting")
	evalJS[bool](p, `(() => { const e = document.querySelector('#decision-reason'); e.value = 'x'.repeat(1001); e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	p.clickText("Reject…")
	p.clickText("Yes, reject")
	p.do(10*time.Second, "inline error", chromedp.WaitVisible(chromedp.CSS("#decision-reason-error")))
	if got := p.text("#decision-reason-error"); !strings.Contains(got, "at most 1000") {
		t.Errorf("a long reason shows %q under the field, want the server's limit", got)
	}
	p.accessible("remediation decision with a field error")
	p.screenshot("remediation-reason-error")
	p.clear("#decision-reason")
	p.do(5*time.Second, "reason", chromedp.SendKeys(chromedp.CSS("#decision-reason"), "needed for the demo"))
	p.clickText("Reject…")
	p.clickText("Yes, reject")
	p.waitFor(time.Minute, "rejected", `document.querySelector('h1 .status').textContent === 'cancelled' && !!document.querySelector('[data-event="approval:rejected"]')`)
	if got := p.text(`[data-event="approval:rejected"]`); !strings.Contains(got, "needed for the demo") {
		t.Errorf("the timeline's rejection reads %q, want the reason", got)
	}
	if got := p.buttons(); contains(got, "Approve…") || contains(got, "Cancel workflow…") {
		t.Errorf("a rejected workflow still offers a decision or a cancel: %q", got)
	}
	p.accessible("rejected remediation")
	p.screenshot("remediation-rejected")

	// Approve: the decision is on the timeline with its reason, and the workflow leaves the gate.
	p.do(10*time.Second, "open approve", chromedp.Navigate(s.URL+"/#/remediations/"+approve), chromedp.WaitVisible(`//button[normalize-space()='Approve…']`))
	p.do(5*time.Second, "reason", chromedp.SendKeys(chromedp.CSS("#decision-reason"), "off-hours window"))
	p.clickText("Approve…")
	p.clickText("Yes, approve")
	// A local space has no pause of its own: the step after the gate fails as the user's to fix.
	p.waitFor(time.Minute, "approved", `!!document.querySelector('[data-event="approval:approved"]') && document.querySelector('h1 .status').textContent === 'failed'`)
	if got := p.text(`[data-event="approval:approved"]`); !strings.Contains(got, "off-hours window") {
		t.Errorf("the timeline's approval reads %q, want the reason", got)
	}
	if got := p.text(".failure"); !strings.Contains(got, "pause_service") || !strings.Contains(got, "user_action") {
		t.Errorf("the failure reads %q, want the step after the gate and its class", got)
	}
	p.accessible("approved remediation")
	p.screenshot("remediation-approved")

	// Cancel, confirmed.
	p.do(10*time.Second, "open cancel", chromedp.Navigate(s.URL+"/#/remediations/"+cancel), chromedp.WaitVisible(`//button[normalize-space()='Cancel workflow…']`))
	p.clickText("Cancel workflow…")
	p.do(5*time.Second, "confirm", chromedp.WaitVisible(`//button[normalize-space()='Yes, cancel it']`))
	p.accessible("remediation cancel confirmation")
	p.clickText("Yes, cancel it")
	p.waitFor(time.Minute, "cancelled", `document.querySelector('h1 .status').textContent === 'cancelled'`)
	p.screenshot("remediation-cancelled")
	t.Logf("axe-core ran on %d screens", p.checks)
}
