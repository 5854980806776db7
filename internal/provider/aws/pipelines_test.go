package aws

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/route53"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
)

// drive runs steps (or their undos) as the engine does, re-running a step that waits.
func drive(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo bool) map[string]pipeline.Outcome {
	return driveCrashing(ctx, t, j, steps, undo, false)
}

// driveCrashing is drive; with crash set, every step is first run once and its result thrown
// away, as when the process dies after the cloud calls and before the checkpoint commits.
func driveCrashing(ctx context.Context, t *testing.T, j *job.Job, steps []pipeline.Step, undo, crash bool) map[string]pipeline.Outcome {
	t.Helper()
	out := map[string]pipeline.Outcome{}
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
		if crash {
			if _, err := fn(ctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: 1}); err != nil && fault.ClassOf(err) != job.ClassTransient {
				t.Fatalf("step %s before the crash: %v", s.Name, err)
			}
		}
		for attempt := 1; ; attempt++ {
			if attempt > 50 {
				t.Fatalf("step %s still waiting", s.Name)
			}
			res, err := fn(ctx, &pipeline.Run{Job: j, Step: s.Name, Attempt: attempt})
			if err != nil && fault.ClassOf(err) == job.ClassTransient {
				continue // the engine retries a transient error with backoff
			}
			if err != nil {
				t.Fatalf("step %s (undo=%v): %v", s.Name, undo, err)
			}
			if j.Infra, err = pipeline.MergeInfra(j.Infra, res.Infra); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != pipeline.OutcomeWait {
				out[s.Name] = res.Outcome
				break
			}
		}
	}
	return out
}

func TestFamilyPipelinesOnAWS(t *testing.T) {
	t.Parallel()
	type check func(ctx context.Context, t *testing.T, p *Provider, j *job.Job) int
	cases := map[string]struct {
		family   job.Family
		config   string
		build    func(p *Provider) pipeline.Pipeline
		count    check
		skipWant string
	}{
		"network with NAT, no peering": {
			family: job.FamilyNetwork, config: `{"cidr":"10.20.0.0/16"}`, skipWant: network.StepPeering,
			build: func(p *Provider) pipeline.Pipeline {
				return network.New(func(context.Context, *job.Job) (network.Driver, error) { return NetworkDriver{P: p}, nil }, 1)
			},
			count: func(ctx context.Context, t *testing.T, p *Provider, j *job.Job) int {
				left, err := p.Leftovers(ctx, JobTags(j))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, v := range left {
					n += v
				}
				return n
			},
		},
		"kubernetes (reference request, new network)": {
			family: job.FamilyKubernetes, config: `{"name":"platform-prod","version":"1.30","nodeGroups":[{"name":"default","instanceType":"m5.large","min":2,"max":6}]}`,
			skipWant: kubernetes.StepComponents,
			build: func(p *Provider) pipeline.Pipeline {
				return kubernetes.New(func(context.Context, *job.Job) (kubernetes.Driver, error) { return KubernetesDriver{P: p}, nil }, nil, 1)
			},
			count: func(ctx context.Context, t *testing.T, p *Provider, j *job.Job) int {
				left, err := p.Leftovers(ctx, JobTags(j))
				if err != nil {
					t.Fatal(err)
				}
				cl, err := p.eks.ListClusters(ctx, &eks.ListClustersInput{})
				if err != nil {
					t.Fatal(err)
				}
				n := len(cl.Clusters)
				for _, c := range cl.Clusters {
					ngs, err := p.eks.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: &c})
					if err != nil {
						t.Fatal(err)
					}
					n += len(ngs.Nodegroups)
				}
				for _, v := range left {
					n += v
				}
				return n
			},
		},
		"registry": {
			family: job.FamilyRegistry, config: `{"name":"team/api","scanOnPush":true}`,
			build: func(p *Provider) pipeline.Pipeline {
				return registry.New(func(context.Context, *job.Job) (registry.Driver, error) { return RegistryDriver{P: p}, nil })
			},
			count: func(ctx context.Context, t *testing.T, p *Provider, j *job.Job) int {
				out, err := p.ecr.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{})
				if err != nil {
					t.Fatal(err)
				}
				return len(out.Repositories)
			},
		},
		"dns zone with records": {
			family: job.FamilyDNSZone, config: `{"name":"svc.example.org","records":[{"name":"api.svc.example.org","type":"A","values":["10.0.0.5"]},{"name":"svc.example.org","type":"TXT","values":["\"v=1\""]}]}`,
			build: func(p *Provider) pipeline.Pipeline {
				return dnszone.New(func(context.Context, *job.Job) (dnszone.Driver, error) { return DNSZoneDriver{P: p}, nil })
			},
			count: func(ctx context.Context, t *testing.T, p *Provider, j *job.Job) int {
				zs, err := p.r53.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
				if err != nil {
					t.Fatal(err)
				}
				n := len(zs.HostedZones)
				for _, z := range zs.HostedZones {
					rr, err := p.r53.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: z.Id})
					if err != nil {
						t.Fatal(err)
					}
					n += len(rr.ResourceRecordSets)
				}
				return n
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "ca-central-1")
			ctx := testCtx(t)
			j := &job.Job{ID: "job_" + sanitize(t.Name()), OrgID: "org_1", Family: tc.family, Provider: "aws", Mode: job.ModeCreate, Config: json.RawMessage(tc.config)}
			pl := tc.build(p)
			if err := pl.Validate(ctx, j); err != nil {
				t.Fatal(err)
			}
			steps := pl.Steps(j)
			// A crash between each step's cloud calls and its checkpoint, then the re-run.
			outcomes := driveCrashing(ctx, t, j, steps, false, true)
			if tc.skipWant != "" && outcomes[tc.skipWant] != pipeline.OutcomeSkip {
				t.Fatalf("%s outcome %v, want skip", tc.skipWant, outcomes[tc.skipWant])
			}
			first := tc.count(ctx, t, p, j)
			if first == 0 {
				t.Fatal("nothing created")
			}
			drive(ctx, t, j, steps, false)
			if again := tc.count(ctx, t, p, j); again != first {
				t.Fatalf("second run: %d resources, first %d", again, first)
			}
			drive(ctx, t, j, steps, true)
			if left := tc.count(ctx, t, p, j); left != 0 {
				t.Fatalf("%d left after teardown", left)
			}
		})
	}
}
