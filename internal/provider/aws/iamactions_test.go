package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go/middleware"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

// callRecorder notes every AWS API operation a provider's clients send, under the pipeline
// step the calling context names.
type callRecorder struct {
	mu    sync.Mutex
	calls map[string]map[string]bool // step → IAM action
}

type stepKey struct{}

func withStep(ctx context.Context, step string) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}

// recording returns a provider on p's configuration whose every client call is recorded.
func (r *callRecorder) recording(p *Provider) *Provider {
	cfg := p.Config().Copy()
	cfg.APIOptions = append(slices.Clone(cfg.APIOptions), func(s *middleware.Stack) error {
		return s.Serialize.Add(middleware.SerializeMiddlewareFunc("groundworkRecordCall",
			func(ctx context.Context, in middleware.SerializeInput, next middleware.SerializeHandler) (middleware.SerializeOutput, middleware.Metadata, error) {
				step, _ := ctx.Value(stepKey{}).(string)
				action := IAMAction(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx))
				r.mu.Lock()
				if r.calls[step] == nil {
					r.calls[step] = map[string]bool{}
				}
				r.calls[step][action] = true
				r.mu.Unlock()
				return next.HandleSerialize(ctx, in)
			}), middleware.After)
	})
	return New(cfg)
}

// runRecorded drives steps forward, then in reverse their undos, each call's context naming
// its step, re-running a step that waits.
func runRecorded(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step) {
	t.Helper()
	for _, undo := range []bool{false, true} {
		for i := range steps {
			s := steps[i]
			if undo {
				s = steps[len(steps)-1-i]
			}
			fn := s.Do
			if undo {
				fn = s.Undo
			}
			if fn == nil {
				continue
			}
			sctx := withStep(ctx, s.Name)
			for attempt := 1; ; attempt++ {
				if attempt > 60 && undo {
					// moto keeps a deleted ElastiCache group "deleting" forever; the delete
					// calls were made and recorded.
					break
				}
				if attempt > 60 {
					t.Fatalf("step %s still waiting", s.Name)
				}
				res, err := fn(sctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: attempt})
				if err != nil {
					t.Fatalf("step %s (undo=%v): %v", s.Name, undo, err)
				}
				if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
					t.Fatal(err)
				}
				if res.Outcome != pipeline.OutcomeWait {
					break
				}
			}
		}
	}
}

func planSteps(j *job.Job, steps []pipeline.Step) []plan.Step {
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	out, _ := PlanSource{}.Steps(context.Background(), j, names)
	return out
}

// TestPlanListsEveryOperationAPipelineCalls runs each family's create and teardown against
// moto with every SDK call recorded, and fails when a step calls an operation that the plan
// does not list for that step: the generated policy would deny it.
func TestPlanListsEveryOperationAPipelineCalls(t *testing.T) {
	t.Parallel()
	type build func(p *Provider, j *job.Job) pipeline.Pipeline
	netw := func(p *Provider, _ *job.Job) pipeline.Pipeline {
		return network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{P: p}, nil }, time.Millisecond)
	}
	vm := func(p *Provider, _ *job.Job) pipeline.Pipeline {
		return vmpool.New(func(context.Context, *job.Job) (vmpool.Driver, error) {
			return VMPoolDriver{P: p, Probe: FakeBootstrapProbe{AllReady: true}}, nil
		}, time.Millisecond)
	}
	ds := func(p *Provider, j *job.Job) pipeline.Pipeline {
		tags := JobTags(j)
		drv := DatastoreDriver{Resolve: func(context.Context, string) (Placement, error) { return Placement{P: p, Tags: tags}, nil }}
		return dspipe.New(dspipe.Options{Drivers: map[string]dspipe.Driver{"aws": drv.Driver()}, Secrets: secretstest.Vault(p.Secrets(tags)), Poll: time.Millisecond})
	}
	cases := []struct {
		name   string
		family job.Family
		config string
		build  build
	}{
		{"network", job.FamilyNetwork, `{"cidr":"10.20.0.0/16"}`, netw},
		{"network without NAT", job.FamilyNetwork, `{"cidr":"10.21.0.0/16","noNAT":true}`, netw},
		{"vm_pool fixed with LB", job.FamilyVMPool, `{"name":"edge","instanceType":"t3.small","min":2,"max":3,"createLoadBalancer":true,"listenerPorts":[80,443]}`, vm},
		{"network with peering", job.FamilyNetwork, `{"cidr":"10.22.0.0/16","noNAT":true,"peering":{"peerVPCID":"$peer"}}`, netw},
		{"vm_pool asg with LB and DNS", job.FamilyVMPool, `{"name":"web","instanceType":"t3.small","mode":"asg","min":1,"max":2,"createLoadBalancer":true,"listenerPorts":[80,443],"domain":"web.example.com","zoneID":"$zone"}`, vm},
		{"vm_pool asg bare", job.FamilyVMPool, `{"name":"batch","instanceType":"t3.small","mode":"asg","min":1,"max":2,"bare":true}`, vm},
		{"kubernetes", job.FamilyKubernetes, `{"name":"plat","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":2,"max":6}]}`,
			func(p *Provider, _ *job.Job) pipeline.Pipeline {
				return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{P: p}, nil }, nil, time.Millisecond)
			}},
		{"registry", job.FamilyRegistry, `{"name":"team/api","scanOnPush":true}`,
			func(p *Provider, _ *job.Job) pipeline.Pipeline {
				return registry.New(func(context.Context, *job.Job) (registry.Driver, error) { return RegistryDriver{P: p}, nil })
			}},
		{"dns_zone", job.FamilyDNSZone, `{"name":"svc.example.org","records":[{"name":"api.svc.example.org","type":"A","values":["10.0.0.5"]}]}`,
			func(p *Provider, _ *job.Job) pipeline.Pipeline {
				return dnszone.New(func(context.Context, *job.Job) (dnszone.Driver, error) { return DNSZoneDriver{P: p}, nil })
			}},
		{"datastore postgres", job.FamilyDatastore, `{"engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":20,"multiAZ":true}`, ds},
		{"datastore redis", job.FamilyDatastore, `{"engine":"redis","version":"7.1","instanceClass":"cache.t3.micro"}`, ds},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, _ := testProvider(t, "eu-central-1")
			rec := &callRecorder{calls: map[string]map[string]bool{}}
			p := rec.recording(base)
			ctx := testCtx(t)
			// What the job refers to is made outside it, unrecorded.
			if strings.Contains(tc.config, "$peer") {
				n, err := base.EnsureNetwork(ctx, NetworkSpec{Tags: Tags{OrgID: "org_plan", JobID: "job_peer", Role: "vpc"}, NoNAT: true, CIDR: "10.99.0.0/16"})
				if err != nil {
					t.Fatal(err)
				}
				tc.config = strings.ReplaceAll(tc.config, "$peer", n.VPCID)
			}
			if strings.Contains(tc.config, "$zone") {
				z, err := base.EnsureZone(ctx, ZoneSpec{Tags: Tags{OrgID: "org_plan", JobID: "job_zone", Role: "zone"}, Name: "example.com"})
				if err != nil {
					t.Fatal(err)
				}
				tc.config = strings.ReplaceAll(tc.config, "$zone", z.ID)
			}
			j := &job.Job{ID: "job_" + sanitize(t.Name()), OrgID: "org_plan", Family: tc.family, Provider: "aws", Mode: job.ModeCreate,
				Config: json.RawMessage(tc.config), Infra: json.RawMessage(`{}`)}
			pl := tc.build(p, j)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			runRecorded(ctx, t, j, steps)
			if len(rec.calls) == 0 {
				t.Fatal("the recorder saw no call: it is not wired")
			}
			planned := map[string][]string{}
			for _, s := range steps {
				planned[s.Name] = StepPlan(j, s.Name).Operations
			}
			var missing []string
			for step, actions := range rec.calls {
				for a := range actions {
					if !slices.Contains(planned[step], a) {
						missing = append(missing, fmt.Sprintf("%s: %s", step, a))
					}
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Fatalf("operations called but not in the plan:\n%s", strings.Join(missing, "\n"))
			}
			// IAM's policy grammar: moto's CreatePolicy validates the document as IAM does, and
			// a managed policy holds at most 6,144 characters without whitespace.
			pol, err := PlanSource{}.Policy(j, (&plan.Plan{Steps: planSteps(j, steps)}).Operations())
			if err != nil {
				t.Fatal(err)
			}
			if n := len(strings.Join(strings.Fields(string(pol.Document)), "")); n > 6144 {
				t.Fatalf("policy is %d characters; IAM's limit is 6144", n)
			}
			if _, err := base.iam.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: ptr("gw-plan-" + sanitize(t.Name())),
				PolicyDocument: ptr(string(pol.Document))}); err != nil {
				t.Fatalf("IAM refused the generated policy: %v\n%s", err, pol.Document)
			}
		})
	}
}

// TestGeneratedPolicyCheckCanFail shows the CreatePolicy check above has teeth: moto refuses
// a document outside IAM's grammar.
func TestGeneratedPolicyCheckCanFail(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-central-1")
	bad := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["ec2CreateVpc"],"Resource":["*"]}]}`
	if _, err := p.iam.CreatePolicy(testCtx(t), &iam.CreatePolicyInput{PolicyName: ptr("gw-bad"), PolicyDocument: ptr(bad)}); err == nil {
		t.Fatal("moto accepted an action without a service prefix")
	}
}

func TestPolicyDocumentScopes(t *testing.T) {
	t.Parallel()
	doc, err := PolicyDocument("org_x", []string{"ec2:CreateVpc", "ec2:DeleteVpc", "ec2:DescribeVpcs", "iam:CreateRole", "iam:PassRole",
		"iam:CreateInstanceProfile", "route53:CreateHostedZone", "route53:DeleteHostedZone", "secretsmanager:GetSecretValue"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Statement []Statement }
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		actions  []string
		resource string
		tagged   bool
	}{
		"GroundworkRead":               {[]string{"ec2:DescribeVpcs"}, "*", false},
		"GroundworkCreate":             {[]string{"ec2:CreateVpc", "route53:CreateHostedZone"}, "*", false},
		"GroundworkChangeOwnResources": {[]string{"ec2:DeleteVpc", "secretsmanager:GetSecretValue"}, "*", true},
		"GroundworkRoles":              {[]string{"iam:CreateRole"}, "arn:aws:iam::*:role/gw-*", false},
		"GroundworkInstanceProfiles":   {[]string{"iam:CreateInstanceProfile"}, "arn:aws:iam::*:instance-profile/gw-*", false},
		"GroundworkPassOwnRoles":       {[]string{"iam:PassRole"}, "arn:aws:iam::*:role/gw-*", false},
		"GroundworkHostedZones":        {[]string{"route53:DeleteHostedZone"}, "arn:aws:route53:::hostedzone/*", false},
	}
	if len(got.Statement) != len(want) {
		t.Fatalf("%d statements, want %d: %s", len(got.Statement), len(want), doc)
	}
	for _, s := range got.Statement {
		w, ok := want[s.Sid]
		if !ok || !slices.Equal(s.Action, w.actions) || s.Resource[0] != w.resource {
			t.Fatalf("statement %s = %+v, want %+v", s.Sid, s, w)
		}
		if tagged := s.Condition["StringEquals"]["aws:ResourceTag/"+TagOrgID] == "org_x"; tagged != w.tagged {
			t.Fatalf("statement %s tag condition = %v, want %v", s.Sid, s.Condition, w.tagged)
		}
	}
}
