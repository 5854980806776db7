package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/chromedp/chromedp"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	awsp "github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/testenv/moto"
)

// TestConsoleVMPoolActions runs the VM pool operations from the job page of a completed ASG
// pool with a load balancer, provisioned against moto: the load balancer is detached and
// attached again (each confirmed), the pool resized, and a size outside [min, max] refused by
// the server under its input. The page follows each operation's run live, without a reload,
// and moto's target group and ASG end as the page says.
func TestConsoleVMPoolActions(t *testing.T) {
	requireBuiltConsole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// A moto of its own: every run of the test starts from an empty account.
	m, err := moto.Start(ctx)
	if err != nil {
		missing(t, "moto: "+err.Error())
	}
	t.Cleanup(m.Stop)
	s := apptest.Start(t, app.Options{PollInterval: 100 * time.Millisecond, AWS: app.AWSOptions{
		Poll: 100 * time.Millisecond,
		// moto runs no command on its instances, so the SSM probe would never see the sentinel.
		Probe: func(*awsp.Provider) awsp.BootstrapProbe { return awsp.FakeBootstrapProbe{AllReady: true} },
	}})
	space := awsSpaceAt(t, s, "aws-moto", m.Endpoint)
	var pool job.Job
	if err := s.Client.Do(ctx, http.MethodPost, "/api/provisioning-jobs", map[string]any{"spaceID": space, "kind": "vm_pool",
		"config": json.RawMessage(`{"name":"web-pool","instanceType":"t3.micro","mode":"asg","min":1,"max":2,"createLoadBalancer":true}`)}, &pool); err != nil {
		t.Fatalf("create vm_pool: %v", err)
	}
	for pool.Status != job.StatusCompleted {
		if pool.Status == job.StatusFailed || ctx.Err() != nil {
			t.Fatalf("the pool is %s, want completed: %+v", pool.Status, pool.Failure)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition; the deadline is ctx's
		if err := s.Client.Do(ctx, http.MethodGet, "/api/provisioning-jobs/"+pool.ID, nil, &pool); err != nil {
			t.Fatalf("get vm_pool: %v", err)
		}
	}

	prov, err := awsp.Open(ctx, awsp.Account{AuthMethod: awsp.AuthStaticKeys, Region: "eu-west-1", Endpoint: m.Endpoint,
		AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "not-a-real-key"})
	if err != nil {
		t.Fatal(err)
	}
	var infra struct {
		LB struct {
			TargetGroupID string `json:"targetGroupID"`
		} `json:"loadBalancer"`
	}
	if err := json.Unmarshal(pool.Infra, &infra); err != nil || infra.LB.TargetGroupID == "" {
		t.Fatalf("no target group in the pool's infra %s (%v)", pool.Infra, err)
	}
	// targets counts the instances moto has in the pool's target group.
	targets := func() int {
		t.Helper()
		out, err := elbv2.NewFromConfig(prov.Config()).DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &infra.LB.TargetGroupID})
		if err != nil {
			t.Fatalf("target health: %v", err)
		}
		return len(out.TargetHealthDescriptions)
	}

	_, tab := browser(t, 1280, 900)
	p := newPage(t, tab, t.ArtifactDir())
	p.signIn(s.URL, s.Token)
	p.do(10*time.Second, "pool page", chromedp.Navigate(s.URL+"/#/jobs/"+pool.ID), chromedp.WaitVisible(`//h2[normalize-space()='VM pool operations']`))
	if got := p.text(".vm-ops p"); !strings.Contains(got, "Load balancer: attached") || !strings.Contains(got, "mode asg") {
		t.Errorf("the completed pool's operations say %q, want the load balancer attached and mode asg", got)
	}
	disabled := evalJS[map[string]bool](p, `Object.fromEntries([...document.querySelectorAll('.vm-ops button')].map(b => [b.textContent.trim(), b.disabled]))`)
	for _, b := range []string{"Attach load balancer…", "Detach load balancer…", "Resize…"} {
		if d, ok := disabled[b]; !ok || d {
			t.Errorf("the completed pool's %q button: present %v, disabled %v; want present and enabled", b, ok, d)
		}
	}
	p.accessible("VM pool completed")
	p.screenshot("vm-pool-completed")

	// Every change of the job's status and of its finalize step is recorded in the page as it
	// happens, so that a run too quick for polling is still seen step by step.
	evalJS[bool](p, `(() => {
		window.__noReload = true;
		window.__seen = [];
		const note = () => {
			const st = document.querySelector('h1 .status'), fin = document.querySelector('tr[data-step=finalize] .status');
			const v = (st ? st.textContent : '') + '/' + (fin ? fin.textContent : '');
			if (window.__seen[window.__seen.length - 1] !== v) window.__seen.push(v);
		};
		new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
		return true;
	})()`)
	if n := targets(); n != 1 {
		t.Fatalf("the completed pool has %d targets in its target group, want its 1 instance", n)
	}
	vmOp := func(button, yes, lb string, want int, shot string) {
		t.Helper()
		evalJS[bool](p, `(window.__seen = [], true)`)
		p.clickText(button)
		p.do(5*time.Second, "confirm "+button, chromedp.WaitVisible(`//*[@role='group'][@aria-label='Confirm the VM operation']`))
		if shot != "" {
			p.accessible(shot)
			p.screenshot(shot)
		}
		p.clickText(yes)
		p.waitFor(2*time.Minute, button+" done", `(() => { const s = window.__seen; return s.length > 1 && s[s.length - 1] === 'completed/done'; })()`)
		seen := evalJS[[]string](p, `window.__seen`)
		if !ranLive(seen) {
			t.Errorf("%s: the page showed %q, want the finalize step's run before completed/done", button, seen)
		}
		if got := p.text(".vm-ops p"); !strings.Contains(got, "Load balancer: "+lb) {
			t.Errorf("after %s the operations say %q, want the load balancer %s", button, got, lb)
		}
		if n := targets(); n != want {
			t.Errorf("after %s moto's target group has %d targets, want %d", button, n, want)
		}
	}
	vmOp("Detach load balancer…", "Yes, detach", "detached", 0, "vm-pool-confirm-detach")
	p.screenshot("vm-pool-detached")
	vmOp("Attach load balancer…", "Yes, attach", "attached", 1, "")
	p.accessible("VM pool attached again")
	p.screenshot("vm-pool-attached")

	// A desired size outside [min, max] is the server's to refuse; its words come back under
	// the input, which is marked invalid.
	setSize := func(id, v string) {
		t.Helper()
		p.clear(id)
		p.do(5*time.Second, "type "+id, chromedp.SendKeys(chromedp.CSS(id), v))
	}
	setSize("#vm-min", "1")
	setSize("#vm-max", "3")
	setSize("#vm-desired", "5")
	p.clickText("Resize…")
	p.clickText("Yes, resize")
	p.do(10*time.Second, "inline error", chromedp.WaitVisible(chromedp.CSS("#vm-desired-error")))
	if got := p.text("#vm-desired-error"); !strings.Contains(got, "desired: 5 is outside [min, max]") {
		t.Errorf("a desired size of 5 in [1, 3] shows %q under the input, want the server's range error", got)
	}
	if got := evalJS[string](p, `document.querySelector('#vm-desired').getAttribute('aria-invalid')`); got != "true" {
		t.Errorf("the refused size's input has aria-invalid=%q, want true", got)
	}
	if got := evalJS[string](p, `document.querySelector('h1 .status').textContent`); got != "completed" {
		t.Errorf("a refused resize left the job %q, want completed", got)
	}
	p.accessible("VM pool resize error")
	p.screenshot("vm-pool-resize-error")

	// A good size runs, and the page shows the new sizes in the job's configuration.
	setSize("#vm-desired", "2")
	p.clickText("Resize…")
	p.do(5*time.Second, "confirm resize", chromedp.WaitVisible(`//p[contains(., 'Resize the pool to min 1, max 3, desired 2?')]`))
	evalJS[bool](p, `(window.__seen = [], true)`)
	p.clickText("Yes, resize")
	p.waitFor(2*time.Minute, "resized", `(() => { const s = window.__seen; return s.length > 1 && s[s.length - 1] === 'completed/done'; })()`)
	if seen := evalJS[[]string](p, `window.__seen`); !ranLive(seen) {
		t.Errorf("resize: the page showed %q, want the finalize step's run before completed/done", seen)
	}
	var cfg struct{ Min, Max, Desired int32 }
	if err := json.Unmarshal([]byte(p.text(`pre[aria-label="Job configuration"]`)), &cfg); err != nil || cfg.Min != 1 || cfg.Max != 3 || cfg.Desired != 2 {
		t.Errorf("the page's configuration after resize is %+v (%v), want min 1, max 3, desired 2", cfg, err)
	}
	if ok := evalJS[bool](p, `!document.querySelector('#vm-desired-error') && window.__noReload === true`); !ok {
		t.Error("after a good resize the page still shows the error, or it reloaded")
	}
	// The ASG in moto is what the page says.
	out, err := autoscaling.NewFromConfig(prov.Config()).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		t.Fatalf("ASGs: %v (%v), want one", out, err)
	}
	if g := out.AutoScalingGroups[0]; *g.MinSize != 1 || *g.MaxSize != 3 || *g.DesiredCapacity != 2 {
		t.Errorf("ASG min/max/desired = %d/%d/%d, want 1/3/2", *g.MinSize, *g.MaxSize, *g.DesiredCapacity)
	}
	p.accessible("VM pool resized")
	p.screenshot("vm-pool-resized")
}

// ranLive says whether the recorded "job status/finalize status" pairs show the finalize step
// pending or running before the job completed again.
func ranLive(seen []string) bool {
	for _, v := range seen {
		if strings.HasSuffix(v, "/pending") || strings.HasSuffix(v, "/running") {
			return true
		}
	}
	return false
}
