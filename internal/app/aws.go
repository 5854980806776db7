package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/registry"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/aws"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/store"
)

// AWSOptions configure the AWS families (vm_pool, network, registry, dns_zone, kubernetes, and
// the datastore family's "aws" driver). The zero value is what production runs.
type AWSOptions struct {
	// Probe, if set, replaces the SSM bootstrap probe. moto runs no command on its emulated
	// instances, so tests against it pass aws.FakeBootstrapProbe.
	Probe func(p *aws.Provider) aws.BootstrapProbe
	// Poll is how long a waiting step asks the engine to wait (default: each pipeline's own).
	Poll time.Duration
	// LeaseTTL overrides the pipelines' leases (5 minutes); crash tests shorten it so that a
	// restarted server claims a dead one's job promptly.
	LeaseTTL time.Duration
	// AfterDo, if set, is called after each forward step's Do returns and before the engine
	// checkpoints its result. Crash tests kill the process there: the cloud calls were made,
	// the record of them was not.
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// awsParts resolves a job to an AWS provider opened with its space's cloud account. Opened
// providers are kept per account, region and credential value: the SSM probe remembers the
// command it sent between polls, and a rotated credential opens a new provider.
type awsParts struct {
	o AWSOptions
	// components installs a new cluster's default components (nil: a cluster job naming
	// components skips them).
	components kubernetes.ComponentInstaller
	// spaces records created clusters as spaces (nil: infra only).
	spaces kubernetes.SpaceRegistrar
	st     store.Store
	sec    secrets.SecretStore

	mu   sync.Mutex
	open map[string]*awsOpen
}

type awsOpen struct {
	p     *aws.Provider
	probe aws.BootstrapProbe
}

func newAWSParts(o AWSOptions, st store.Store, sec secrets.SecretStore) *awsParts {
	return &awsParts{o: o, st: st, sec: sec, open: map[string]*awsOpen{}}
}

// awsCredentials is the JSON a cloud account's credentials secret holds (see api/accounts.go).
type awsCredentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken"`
	RoleARN         string `json:"roleArn"`
	ExternalID      string `json:"externalId"`
}

// awsAccountConfig is what an AWS account's public config may say.
type awsAccountConfig struct {
	RoleARN    string `json:"roleArn"`
	ExternalID string `json:"externalId"`
	// Endpoint overrides every service's endpoint (an AWS-compatible cloud); empty means
	// AWS_ENDPOINT_URL, else AWS itself.
	Endpoint string `json:"endpoint"`
}

// resolve opens (or reuses) the provider of j's space.
func (a *awsParts) resolve(ctx context.Context, j *job.Job) (*awsOpen, error) {
	if j.Provider != "aws" {
		return nil, fault.UserAction(fmt.Errorf("job %s is on provider %q", j.ID, j.Provider), "WrongProvider",
			string(j.Family)+" jobs on this server run on AWS spaces only.", "")
	}
	sp, err := a.st.GetSpace(ctx, j.OrgID, j.SpaceID)
	if err != nil {
		return nil, a.lookupErr("space "+j.SpaceID, err)
	}
	if sp.CloudAccountID == "" {
		return nil, fault.UserAction(fmt.Errorf("space %s names no cloud account", sp.ID), "NoCloudAccount",
			"Give the space a cloudAccountID of an AWS cloud account.", "")
	}
	acc, err := a.st.GetCloudAccount(ctx, j.OrgID, sp.CloudAccountID)
	if err != nil {
		return nil, a.lookupErr("cloud account "+sp.CloudAccountID, err)
	}
	account := aws.Account{AuthMethod: aws.AuthMethod(acc.AuthMethod), Region: sp.Region}
	if account.Region == "" {
		account.Region = acc.Region
	}
	var cfg awsAccountConfig
	if len(acc.Config) > 0 {
		_ = json.Unmarshal(acc.Config, &cfg) // unknown shapes mean "no overrides"
	}
	account.RoleARN, account.ExternalID, account.Endpoint = cfg.RoleARN, cfg.ExternalID, cfg.Endpoint
	secretValue := ""
	if acc.CredentialsRef != "" {
		if a.sec == nil {
			return nil, fault.System(errors.New("cloud account credentials by reference, but this server has no secret store"))
		}
		v, err := a.sec.Get(ctx, acc.CredentialsRef)
		if errors.Is(err, secrets.ErrNotFound) {
			return nil, fault.UserAction(fmt.Errorf("credentials of %s: %w", acc.ID, err), "CredentialsMissing",
				"The cloud account's credentials secret is gone; update the account's credentials.", "")
		}
		if err != nil {
			return nil, fault.Transient(fmt.Errorf("read credentials of %s: %w", acc.ID, err))
		}
		var c awsCredentials
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return nil, fault.UserAction(fmt.Errorf("credentials of %s are not a JSON object", acc.ID), "CredentialsInvalid",
				"Store the account's credentials as accessKeyId/secretAccessKey (and sessionToken or roleArn).", "")
		}
		secretValue = v
		account.AccessKeyID, account.SecretAccessKey, account.SessionToken = c.AccessKeyID, c.SecretAccessKey, c.SessionToken
		if c.RoleARN != "" {
			account.RoleARN = c.RoleARN
		}
		if c.ExternalID != "" {
			account.ExternalID = c.ExternalID
		}
	}
	sum := sha256.Sum256([]byte(secretValue))
	key := acc.ID + "|" + account.Region + "|" + string(account.AuthMethod) + "|" + account.Endpoint + "|" + hex.EncodeToString(sum[:])
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.open[key]; ok {
		return o, nil
	}
	p, err := aws.Open(ctx, account)
	if err != nil {
		return nil, err
	}
	o := &awsOpen{p: p}
	if a.o.Probe != nil {
		o.probe = a.o.Probe(p)
	} else {
		o.probe = aws.NewSSMProbe(p)
	}
	a.open[key] = o
	return o, nil
}

func (a *awsParts) lookupErr(what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fault.UserAction(fmt.Errorf("%s: %w", what, err), "NotFound", "The job's "+what+" was deleted; recreate it.", "")
	}
	return fault.Transient(fmt.Errorf("read %s: %w", what, err))
}

// pipelines returns the AWS families, each refusing at Validate a job whose space is not on
// AWS (a clear 400 naming the field, never a failure at run time).
func (a *awsParts) pipelines() []pipeline.Pipeline {
	poll := a.o.Poll
	vm := vmpool.New(func(ctx context.Context, j *job.Job) (vmpool.Driver, error) {
		o, err := a.resolve(ctx, j)
		if err != nil {
			return nil, err
		}
		return aws.VMPoolDriver{P: o.p, Probe: o.probe}, nil
	}, poll)
	return []pipeline.Pipeline{
		&awsVMPool{awsPipeline: awsPipeline{Pipeline: vm, ttl: a.o.LeaseTTL, afterDo: a.o.AfterDo}, vm: vm},
		&awsPipeline{ttl: a.o.LeaseTTL, afterDo: a.o.AfterDo, Pipeline: network.New(func(ctx context.Context, j *job.Job) (network.Driver, error) {
			o, err := a.resolve(ctx, j)
			if err != nil {
				return nil, err
			}
			return aws.NetworkDriver{P: o.p}, nil
		}, poll)},
		&awsPipeline{ttl: a.o.LeaseTTL, afterDo: a.o.AfterDo, Pipeline: registry.New(func(ctx context.Context, j *job.Job) (registry.Driver, error) {
			o, err := a.resolve(ctx, j)
			if err != nil {
				return nil, err
			}
			return aws.RegistryDriver{P: o.p}, nil
		})},
		&awsPipeline{ttl: a.o.LeaseTTL, afterDo: a.o.AfterDo, Pipeline: dnszone.New(func(ctx context.Context, j *job.Job) (dnszone.Driver, error) {
			o, err := a.resolve(ctx, j)
			if err != nil {
				return nil, err
			}
			return aws.DNSZoneDriver{P: o.p}, nil
		})},
		&awsPipeline{ttl: a.o.LeaseTTL, afterDo: a.o.AfterDo, Pipeline: kubernetes.New(func(ctx context.Context, j *job.Job) (kubernetes.Driver, error) {
			o, err := a.resolve(ctx, j)
			if err != nil {
				return nil, err
			}
			return aws.KubernetesDriver{P: o.p}, nil
		}, a.components, poll).WithSpaces(a.spaces)},
	}
}

// datastoreDriver is the datastore pipeline's driver for provider "aws": RDS and ElastiCache
// in the account of the job's space.
func (a *awsParts) datastoreDriver() dspipe.Driver {
	return aws.DatastoreDriver{Resolve: func(ctx context.Context, jobID string) (aws.Placement, error) {
		j, err := a.st.GetJob(ctx, &store.GetJobParams{ID: jobID})
		if err != nil {
			return aws.Placement{}, a.lookupErr("job "+jobID, err)
		}
		o, err := a.resolve(ctx, j)
		if err != nil {
			return aws.Placement{}, err
		}
		return aws.Placement{P: o.p, Tags: aws.JobTags(j)}, nil
	}}.Driver()
}

// Steps implements pipeline.Pipeline.
func (p *awsPipeline) Steps(j *job.Job) []pipeline.Step {
	return p.hook(p.Pipeline.Steps(j))
}

// hook wraps each Do with the AfterDo hook, if any.
func (p *awsPipeline) hook(steps []pipeline.Step) []pipeline.Step {
	if p.afterDo == nil {
		return steps
	}
	for i := range steps {
		do, name := steps[i].Do, steps[i].Name
		if do == nil {
			continue
		}
		steps[i].Do = func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			res, err := do(ctx, r)
			p.afterDo(ctx, r.Job, name)
			return res, err
		}
	}
	return steps
}

// awsPipeline is an AWS family as this server runs it: refused at Validate on another
// provider, field errors answered as the API's, the lease optionally shortened.
type awsPipeline struct {
	pipeline.Pipeline
	ttl     time.Duration
	afterDo func(ctx context.Context, j *job.Job, step string)
}

// LeaseTTL implements pipeline.Pipeline.
func (p *awsPipeline) LeaseTTL() time.Duration {
	if p.ttl > 0 {
		return p.ttl
	}
	return p.Pipeline.LeaseTTL()
}

// Validate implements pipeline.Pipeline.
func (p *awsPipeline) Validate(ctx context.Context, j *job.Job) error {
	if j.Provider != "aws" {
		return fieldErrors{{Field: "spaceID", Rule: "provider",
			Message: fmt.Sprintf("%s is not available on the %s provider; use a space on an AWS cloud account", p.Family(), j.Provider)}}
	}
	if err := p.Pipeline.Validate(ctx, j); err != nil {
		var fe api.FieldErrorer
		if errors.As(err, &fe) {
			return err
		}
		return fieldErrors{{Field: "config", Rule: "valid", Message: err.Error()}}
	}
	return nil
}

// awsVMPool adds the VM operations of PATCH /api/provisioning-jobs/{id} {"vmOp"} to the
// vm_pool pipeline (api.VMOperator). The operation runs through the engine, not in the
// request: PlanVMOp records it in the config and re-opens the finalize step, whose Do then
// applies it (vmpool.Pipeline.VMOp) and returns the infra patch the engine checkpoints. So an
// operation is durable, leased and retried like any step, and survives a restart.
type awsVMPool struct {
	awsPipeline
	vm *vmpool.Pipeline
}

// configVMOp is the config key holding the last requested VM operation.
const configVMOp = "vmOp"

// PlanVMOp implements api.VMOperator.
func (p *awsVMPool) PlanVMOp(j *job.Job, op string) (json.RawMessage, []job.StepRecord, error) {
	if op != vmpool.OpAttachLB && op != vmpool.OpDetachLB {
		return nil, nil, fieldErrors{{Field: "vmOp", Rule: "enum", Message: "must be attach_lb or detach_lb"}}
	}
	var lb vmpool.LoadBalancer
	if ok, err := (&pipeline.Run{Job: j}).Infra(vmpool.InfraLoadBalancer, &lb); err != nil || !ok || lb.TargetGroupID == "" {
		return nil, nil, fieldErrors{{Field: "vmOp", Rule: "loadBalancer", Message: "the pool has no load balancer; create it with createLoadBalancer: true"}}
	}
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg == nil {
		return nil, nil, fieldErrors{{Field: "config", Rule: "type", Message: "the job's config is not an object"}}
	}
	cfg[configVMOp] = op
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	steps := slices.Clone(j.Steps)
	i := j.StepIndex(vmpool.StepFinalize)
	if i < 0 {
		return nil, nil, fieldErrors{{Field: "vmOp", Rule: "steps", Message: "the job has no finalize step"}}
	}
	steps[i] = job.StepRecord{Name: vmpool.StepFinalize, Status: job.StepPending, Message: "vmOp " + op}
	return out, steps, nil
}

// opResize is the config's vmOp while a resize is pending (PATCH {"min","max","desired"}).
const opResize = "resize"

// PlanResize implements api.VMResizer: the new sizes go into the config (an ASG pool only),
// and finalize, re-opened, patches the ASG in place (vmpool.Pipeline.Resize).
func (p *awsVMPool) PlanResize(j *job.Job, min, max, desired *int32) (json.RawMessage, []job.StepRecord, error) {
	c, err := vmpool.DecodeConfig(j.Config)
	if err != nil {
		return nil, nil, fieldErrors{{Field: "config", Rule: "type", Message: err.Error()}}
	}
	if c.Mode != "asg" {
		return nil, nil, fieldErrors{{Field: "min", Rule: "mode", Message: "only an ASG pool (mode asg) resizes in place; this one is " + c.Mode}}
	}
	if min != nil {
		c.Min = *min
	}
	if max != nil {
		c.Max = *max
	}
	if desired != nil {
		c.Desired = *desired
	}
	if err := c.Validate(); err != nil {
		return nil, nil, fieldErrors{{Field: "desired", Rule: "range", Message: err.Error()}}
	}
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg == nil {
		return nil, nil, fieldErrors{{Field: "config", Rule: "type", Message: "the job's config is not an object"}}
	}
	cfg["min"], cfg["max"], cfg["desired"], cfg[configVMOp] = c.Min, c.Max, c.Desired, opResize
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	i := j.StepIndex(vmpool.StepFinalize)
	if i < 0 {
		return nil, nil, fieldErrors{{Field: "min", Rule: "steps", Message: "the job has no finalize step"}}
	}
	steps := slices.Clone(j.Steps)
	steps[i] = job.StepRecord{Name: vmpool.StepFinalize, Status: job.StepPending,
		Message: fmt.Sprintf("resize to min %d, max %d, desired %d", c.Min, c.Max, c.Desired)}
	return out, steps, nil
}

// Steps implements pipeline.Pipeline: finalize applies a requested VM operation.
func (p *awsVMPool) Steps(j *job.Job) []pipeline.Step {
	steps := p.vm.Steps(j)
	var cfg struct {
		VMOp string `json:"vmOp"`
	}
	if json.Unmarshal(j.Config, &cfg) != nil || cfg.VMOp == "" {
		return p.hook(steps)
	}
	for i := range steps {
		if steps[i].Name != vmpool.StepFinalize {
			continue
		}
		steps[i].Do = func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			if cfg.VMOp == opResize {
				c, err := vmpool.DecodeConfig(r.Job.Config)
				if err != nil {
					return pipeline.Result{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
				}
				if _, err := p.vm.Resize(ctx, r.Job, c.Min, c.Max, c.Desired); err != nil {
					return pipeline.Result{}, err
				}
				res := pipeline.Done(nil)
				res.Message = fmt.Sprintf("resized to min %d, max %d, desired %d", c.Min, c.Max, c.Desired)
				return res, nil
			}
			patch, err := p.vm.VMOp(ctx, r.Job, cfg.VMOp)
			if err != nil {
				return pipeline.Result{}, err
			}
			res := pipeline.Done(patch)
			res.Message = "vmOp " + cfg.VMOp + " applied"
			return res, nil
		}
	}
	return p.hook(steps)
}

// clusterToken mints a bearer token for an EKS cluster the job created, from the job's cloud
// account (aws-iam-authenticator's format); nothing long-lived is stored.
func (a *awsParts) clusterToken(ctx context.Context, j *job.Job, cl kubernetes.Cluster) (string, error) {
	o, err := a.resolve(ctx, j)
	if err != nil {
		return "", err
	}
	tok, _, err := o.p.ClusterToken(ctx, cl.Name)
	return tok, err
}
