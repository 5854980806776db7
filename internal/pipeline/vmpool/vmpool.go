// Package vmpool is the VM pool family's pipeline: validate → network → IAM →
// launch template → VMs → [load balancer → target group → listeners → DNS record] → register
// space → finalize; 7 steps without a load balancer, 11 with. A step with nothing to do (no
// zone for the DNS record) is recorded as skipped, so the count stays the reference's. The
// cloud work goes through Driver, which each provider implements.
package vmpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Step names, stable: they are stored in job step records.
const (
	StepValidate       = "validate"
	StepNetwork        = "create_network"
	StepIAM            = "create_iam"
	StepLaunchTemplate = "create_launch_template"
	StepVMs            = "create_vms"
	StepLoadBalancer   = "create_load_balancer"
	StepTargetGroup    = "create_target_group"
	StepListeners      = "create_listeners"
	StepDNSRecord      = "create_dns_record"
	StepRegisterSpace  = "register_space"
	StepFinalize       = "finalize"
)

// Infra keys (the reference's InfraConfig fields).
const (
	InfraNetwork        = "network"
	InfraIAM            = "iam"
	InfraLaunchTemplate = "launchTemplate"
	InfraVMs            = "vms"
	InfraLoadBalancer   = "loadBalancer"
	InfraDNS            = "dnsRecord"
	InfraSpace          = "space"
	InfraBootstrapReady = "bootstrapNginxReady"
	// InfraBootstrapSince holds, per VM ID, when the VMs step first saw the VM running
	// without its bootstrap sentinel: the bootstrap deadline counts from it, across restarts.
	InfraBootstrapSince = "bootstrapSince"
	InfraLBAttached     = "lbAttached"
)

// Config is the reference's VM request.
type Config struct {
	Name               string   `json:"name"`
	InstanceType       string   `json:"instanceType"`
	Mode               string   `json:"mode,omitempty"` // fixed (default) | asg
	Min                int32    `json:"min"`
	Max                int32    `json:"max"`
	Desired            int32    `json:"desired,omitempty"`
	CreateLoadBalancer bool     `json:"createLoadBalancer,omitempty"`
	ListenerPorts      []int32  `json:"listenerPorts,omitempty"`
	Bare               bool     `json:"bare,omitempty"`
	ImageID            string   `json:"imageID,omitempty"`
	VPCID              string   `json:"vpcID,omitempty"`
	SubnetIDs          []string `json:"subnetIDs,omitempty"`
	Domain             string   `json:"domain,omitempty"`
	ZoneID             string   `json:"zoneID,omitempty"`
	CertificateARN     string   `json:"certificateArn,omitempty"`
	HealthCheckPath    string   `json:"healthCheckPath,omitempty"`
	HealthCheckPort    int32    `json:"healthCheckPort,omitempty"`
	// BootstrapTimeoutMinutes is how long a running VM may go without its bootstrap sentinel
	// before the VMs step fails (default 20).
	BootstrapTimeoutMinutes int `json:"bootstrapTimeoutMinutes,omitempty"`
	// WaitForBootstrap false makes a running VM count as ready without its sentinel, for
	// images whose VMs cannot report it; nil is true.
	WaitForBootstrap *bool `json:"waitForBootstrap,omitempty"`
	// ScalingPolicy is an ASG pool's target-tracking scaling policy; nil: none.
	ScalingPolicy *ScalingPolicy `json:"scalingPolicy,omitempty"`
}

// ScalingPolicy keeps an ASG pool's average CPU near TargetCPU percent (target tracking).
type ScalingPolicy struct {
	TargetCPU float64 `json:"targetCPU"`
}

// CPU is the policy's target, or 0 when there is no policy.
func (s *ScalingPolicy) CPU() float64 {
	if s == nil {
		return 0
	}
	return s.TargetCPU
}

// Bootstrap timeout bounds, in minutes.
const (
	DefaultBootstrapTimeoutMinutes = 20
	MaxBootstrapTimeoutMinutes     = 240
)

// WaitsForBootstrap reports whether the VMs step waits for the bootstrap sentinel.
func (c Config) WaitsForBootstrap() bool { return c.WaitForBootstrap == nil || *c.WaitForBootstrap }

// BootstrapTimeout is the bootstrap deadline of each VM, counted from when it is first seen
// running.
func (c Config) BootstrapTimeout() time.Duration {
	return time.Duration(c.BootstrapTimeoutMinutes) * time.Minute
}

// DecodeConfig reads and defaults a job's config.
func DecodeConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
	}
	if c.Mode == "" {
		c.Mode = "fixed"
	}
	if c.Desired == 0 {
		c.Desired = c.Min
	}
	if c.CreateLoadBalancer && len(c.ListenerPorts) == 0 {
		c.ListenerPorts = []int32{80, 443}
	}
	if c.HealthCheckPath == "" {
		c.HealthCheckPath = "/healthz"
	}
	if c.HealthCheckPort == 0 {
		c.HealthCheckPort = 80
	}
	if c.BootstrapTimeoutMinutes == 0 {
		c.BootstrapTimeoutMinutes = DefaultBootstrapTimeoutMinutes
	}
	return c, nil
}

// Validate checks c; errors name the field.
func (c Config) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("name: required")
	case c.InstanceType == "":
		return errors.New("instanceType: required")
	case c.Mode != "fixed" && c.Mode != "asg":
		return fmt.Errorf("mode: %q is not fixed or asg", c.Mode)
	case c.Min < 1 || c.Max < c.Min:
		return fmt.Errorf("min, max: want 1 <= min <= max, got %d, %d", c.Min, c.Max)
	case c.Desired < c.Min || c.Desired > c.Max:
		return fmt.Errorf("desired: %d is outside [min, max]", c.Desired)
	case c.BootstrapTimeoutMinutes < 1 || c.BootstrapTimeoutMinutes > MaxBootstrapTimeoutMinutes:
		return fmt.Errorf("bootstrapTimeoutMinutes: %d is outside [1, %d]", c.BootstrapTimeoutMinutes, MaxBootstrapTimeoutMinutes)
	}
	for _, p := range c.ListenerPorts {
		if p != 80 && p != 443 {
			return fmt.Errorf("listenerPorts: %d is not 80 or 443", p)
		}
	}
	if c.ScalingPolicy != nil {
		if c.Mode != "asg" {
			return validation.New("config.scalingPolicy", "mode", "a scaling policy needs mode asg; this pool is "+c.Mode)
		}
		if t := c.ScalingPolicy.TargetCPU; t < 1 || t > 100 {
			return validation.New("config.scalingPolicy.targetCPU", "range", fmt.Sprintf("%v is outside [1, 100] (percent)", t))
		}
	}
	return nil
}

// Network is what the network step records.
type Network struct {
	VPCID            string   `json:"vpcID"`
	CIDR             string   `json:"cidr"`
	Existing         bool     `json:"existing,omitempty"`
	PublicSubnetIDs  []string `json:"publicSubnetIDs,omitempty"`
	PrivateSubnetIDs []string `json:"privateSubnetIDs,omitempty"`
	Ready            bool     `json:"ready"`
}

// LaunchTemplate is what the launch-template step records (with the groups it made).
type LaunchTemplate struct {
	ID                string `json:"launchTemplateID"`
	Version           int64  `json:"version"`
	VMSecurityGroupID string `json:"vmSecurityGroupID"`
	LBSecurityGroupID string `json:"lbSecurityGroupID,omitempty"`
}

// VM is one instance with its lifecycle state (pending | bootstrap | ready | stopped).
type VM struct {
	ID        string `json:"id"`
	PrivateIP string `json:"privateIP,omitempty"`
	State     string `json:"state"`
}

// LoadBalancer is what the LB steps record.
type LoadBalancer struct {
	ID            string   `json:"loadBalancerID"`
	DNSName       string   `json:"dnsName"`
	ZoneID        string   `json:"canonicalZoneID,omitempty"`
	Ready         bool     `json:"ready"`
	TargetGroupID string   `json:"targetGroupID,omitempty"`
	ListenerIDs   []string `json:"listenerIDs,omitempty"`
	CertificateID string   `json:"certificateID,omitempty"`
	SelfSigned    bool     `json:"selfSignedCertificate,omitempty"`
}

// Driver is the cloud work of a VM pool; every method is idempotent and keyed by the job.
type Driver interface {
	EnsureNetwork(ctx context.Context, j *job.Job, c Config) (Network, error)
	DeleteNetwork(ctx context.Context, j *job.Job) (done bool, err error)
	EnsureIAM(ctx context.Context, j *job.Job) (instanceProfile string, err error)
	DeleteIAM(ctx context.Context, j *job.Job) error
	EnsureLaunchTemplate(ctx context.Context, j *job.Job, c Config, n Network, instanceProfile string) (LaunchTemplate, error)
	DeleteLaunchTemplate(ctx context.Context, j *job.Job) error
	EnsureVMs(ctx context.Context, j *job.Job, c Config, n Network, lt LaunchTemplate) ([]VM, error)
	// CheckBootstrap advances VMs whose cloud-init wrote the sentinel to ready.
	CheckBootstrap(ctx context.Context, vms []VM) (out []VM, allReady bool, err error)
	DeleteVMs(ctx context.Context, j *job.Job) (done bool, err error)
	Resize(ctx context.Context, j *job.Job, min, max, desired int32) error
	EnsureLoadBalancer(ctx context.Context, j *job.Job, c Config, n Network, lt LaunchTemplate) (LoadBalancer, error)
	EnsureTargetGroup(ctx context.Context, j *job.Job, c Config, n Network) (string, error)
	EnsureListeners(ctx context.Context, j *job.Job, c Config, lb LoadBalancer) (LoadBalancer, error)
	DeleteLoadBalancer(ctx context.Context, j *job.Job) error
	DeleteTargetGroup(ctx context.Context, j *job.Job) error
	DeleteListeners(ctx context.Context, j *job.Job) error
	AttachLB(ctx context.Context, j *job.Job, c Config, targetGroup string, vms []VM) error
	DetachLB(ctx context.Context, j *job.Job, c Config, targetGroup string, vms []VM) error
	UpsertDNS(ctx context.Context, zoneID, name string, lb LoadBalancer) error
	DeleteDNS(ctx context.Context, zoneID, name string, lb LoadBalancer) error
}

// ConsoleReader is what a Driver may also do: read a VM's console (serial port) output, which
// the VMs step quotes when a VM misses its bootstrap deadline.
type ConsoleReader interface {
	ConsoleOutput(ctx context.Context, vm VM) (string, error)
}

// Resolver finds the driver for a job (its provider, its space's cloud account and region).
type Resolver func(ctx context.Context, j *job.Job) (Driver, error)

// Pipeline is the vm_pool family's pipeline.
type Pipeline struct {
	load steps.Loader[Config, Driver]
	poll time.Duration
	now  func() time.Time
}

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline; poll is how long a waiting step asks the engine to wait (default 10s).
func New(resolve Resolver, poll time.Duration) *Pipeline {
	if poll <= 0 {
		poll = 10 * time.Second
	}
	return &Pipeline{load: steps.Loader[Config, Driver]{Decode: DecodeConfig, Resolve: resolve}, poll: poll, now: time.Now}
}

// WithClock makes now the pipeline's clock (time.Now by default), which the bootstrap
// deadline is measured with; it returns p.
func (p *Pipeline) WithClock(now func() time.Time) *Pipeline {
	p.now = now
	return p
}

// Family implements pipeline.Pipeline.
func (p *Pipeline) Family() job.Family { return job.FamilyVMPool }

// LeaseTTL implements pipeline.Pipeline: each step is a few API calls; waits release the lease.
func (p *Pipeline) LeaseTTL() time.Duration { return 5 * time.Minute }

// Validate implements pipeline.Pipeline.
func (p *Pipeline) Validate(_ context.Context, j *job.Job) error {
	c, err := DecodeConfig(j.Config)
	if err != nil {
		return err
	}
	return c.Validate()
}

// Steps implements pipeline.Pipeline: 7 steps, or 11 with a load balancer.
func (p *Pipeline) Steps(j *job.Job) []pipeline.Step {
	c, _ := DecodeConfig(j.Config)
	list := []pipeline.Step{
		// The step checks the config only: the provider rule in Validate is for admission.
		steps.Validate(StepValidate, steps.CheckConfig(DecodeConfig)),
		steps.Network(StepNetwork, InfraNetwork, p.load, p.poll, func(n Network) bool { return n.Ready }),
		steps.IAM(StepIAM, InfraIAM, p.load, ensureInstanceProfile, Driver.DeleteIAM),
		p.step(StepLaunchTemplate, p.launchTemplate, p.undoLaunchTemplate),
		p.step(StepVMs, p.vms, p.undoVMs),
	}
	if c.CreateLoadBalancer {
		list = append(list,
			p.step(StepLoadBalancer, p.loadBalancer, p.undoLoadBalancer),
			p.step(StepTargetGroup, p.targetGroup, p.undoTargetGroup),
			p.step(StepListeners, p.listeners, p.undoListeners),
			p.step(StepDNSRecord, p.dnsRecord, p.undoDNSRecord),
		)
	}
	return append(list,
		pipeline.Step{Name: StepRegisterSpace, Do: p.load.Do(p.registerSpace), Undo: p.undoRegisterSpace},
		p.finalize(j),
	)
}

// step makes a step whose Do and Undo run with the job's config and driver.
func (p *Pipeline) step(name string, do, undo func(context.Context, *pipeline.Run, Config, Driver) (pipeline.Result, error)) pipeline.Step {
	return pipeline.Step{Name: name, Do: p.load.Do(do), Undo: p.load.Do(undo)}
}

// ensureInstanceProfile records the profile as the reference's InfraConfig has it: an object,
// not a bare name.
func ensureInstanceProfile(d Driver, ctx context.Context, j *job.Job) (map[string]string, error) {
	prof, err := d.EnsureIAM(ctx, j)
	if err != nil {
		return nil, err
	}
	return map[string]string{"instanceProfile": prof}, nil
}

func (p *Pipeline) launchTemplate(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	n, err := pipeline.InfraOf[Network](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	iam, err := pipeline.InfraOf[map[string]string](r, InfraIAM)
	if err != nil {
		return pipeline.Result{}, err
	}
	lt, err := d.EnsureLaunchTemplate(ctx, r.Job, c, n, iam["instanceProfile"])
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraLaunchTemplate: lt}), nil
}

func (p *Pipeline) undoLaunchTemplate(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	return pipeline.Done(map[string]any{InfraLaunchTemplate: nil}), d.DeleteLaunchTemplate(ctx, r.Job)
}

func (p *Pipeline) vms(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	n, err := pipeline.InfraOf[Network](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	lt, err := pipeline.InfraOf[LaunchTemplate](r, InfraLaunchTemplate)
	if err != nil {
		return pipeline.Result{}, err
	}
	vms, err := d.EnsureVMs(ctx, r.Job, c, n, lt)
	if err != nil {
		return pipeline.Result{}, err
	}
	ready := len(vms) > 0
	if c.WaitsForBootstrap() {
		if vms, ready, err = d.CheckBootstrap(ctx, vms); err != nil {
			return pipeline.Result{}, err
		}
	} else {
		// Without the sentinel a running VM is as ready as it is known to get.
		for i := range vms {
			if vms[i].State == stateBootstrap {
				vms[i].State = stateReady
			}
			ready = ready && vms[i].State == stateReady
		}
	}
	infra := map[string]any{InfraVMs: vms}
	if !ready || int32(len(vms)) < c.Desired {
		since, late, err := p.bootstrapClock(r, c, vms)
		if err != nil {
			return pipeline.Result{}, err
		}
		if late != nil {
			return pipeline.Result{}, p.bootstrapTimeout(ctx, r, c, d, *late, since[late.ID])
		}
		if len(since) > 0 {
			infra[InfraBootstrapSince] = since
		} else {
			infra[InfraBootstrapSince] = nil
		}
		msg := fmt.Sprintf("%d VMs, waiting for the bootstrap sentinel on all %d", len(vms), c.Desired)
		if !c.WaitsForBootstrap() {
			msg = fmt.Sprintf("%d VMs, waiting for all %d to run", len(vms), c.Desired)
		}
		return steps.CloudWait(p.poll, msg, infra), nil
	}
	infra[InfraBootstrapReady] = !c.Bare && c.WaitsForBootstrap()
	infra[InfraBootstrapSince] = nil
	return pipeline.Done(infra), nil
}

func (p *Pipeline) undoVMs(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	done, err := d.DeleteVMs(ctx, r.Job)
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Gone(InfraVMs, done, p.poll, "waiting for the VMs to terminate"), nil
}

func (p *Pipeline) loadBalancer(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	n, err := pipeline.InfraOf[Network](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	lt, err := pipeline.InfraOf[LaunchTemplate](r, InfraLaunchTemplate)
	if err != nil {
		return pipeline.Result{}, err
	}
	lb, err := d.EnsureLoadBalancer(ctx, r.Job, c, n, lt)
	if err != nil {
		return pipeline.Result{}, err
	}
	return steps.Ensured(InfraLoadBalancer, lb, lb.Ready, p.poll, "waiting for the load balancer"), nil
}

func (p *Pipeline) undoLoadBalancer(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	return pipeline.Done(map[string]any{InfraLoadBalancer: nil}), d.DeleteLoadBalancer(ctx, r.Job)
}

func (p *Pipeline) targetGroup(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	n, err := pipeline.InfraOf[Network](r, InfraNetwork)
	if err != nil {
		return pipeline.Result{}, err
	}
	lb, err := pipeline.InfraOf[LoadBalancer](r, InfraLoadBalancer)
	if err != nil {
		return pipeline.Result{}, err
	}
	vms, err := pipeline.InfraOf[[]VM](r, InfraVMs)
	if err != nil {
		return pipeline.Result{}, err
	}
	if lb.TargetGroupID, err = d.EnsureTargetGroup(ctx, r.Job, c, n); err != nil {
		return pipeline.Result{}, err
	}
	if err := d.AttachLB(ctx, r.Job, c, lb.TargetGroupID, vms); err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraLoadBalancer: lb, InfraLBAttached: true}), nil
}

// undoTargetGroup detaches the pool first: the reference's teardown starts by detaching the LB.
func (p *Pipeline) undoTargetGroup(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	var lb LoadBalancer
	var vms []VM
	_, _ = r.Infra(InfraLoadBalancer, &lb)
	_, _ = r.Infra(InfraVMs, &vms)
	if lb.TargetGroupID != "" {
		if err := d.DetachLB(ctx, r.Job, c, lb.TargetGroupID, vms); err != nil {
			return pipeline.Result{}, err
		}
	}
	if err := d.DeleteTargetGroup(ctx, r.Job); err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraLBAttached: nil}), nil
}

func (p *Pipeline) listeners(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	lb, err := pipeline.InfraOf[LoadBalancer](r, InfraLoadBalancer)
	if err != nil {
		return pipeline.Result{}, err
	}
	if lb, err = d.EnsureListeners(ctx, r.Job, c, lb); err != nil {
		return pipeline.Result{}, err
	}
	res := pipeline.Done(map[string]any{InfraLoadBalancer: lb})
	if lb.SelfSigned {
		// The reference's request works as written; the job says what it did about TLS.
		res.Message = "no certificate given: port 443 uses a self-signed certificate imported into ACM"
	}
	return res, nil
}

func (p *Pipeline) undoListeners(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	return pipeline.Done(nil), d.DeleteListeners(ctx, r.Job)
}

func (p *Pipeline) dnsRecord(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	if c.ZoneID == "" || c.Domain == "" {
		return pipeline.Skip("no DNS zone and domain given: reach the pool at the load balancer's DNS name"), nil
	}
	lb, err := pipeline.InfraOf[LoadBalancer](r, InfraLoadBalancer)
	if err != nil {
		return pipeline.Result{}, err
	}
	if err := d.UpsertDNS(ctx, c.ZoneID, c.Domain, lb); err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraDNS: map[string]string{"zoneID": c.ZoneID, "name": c.Domain}}), nil
}

func (p *Pipeline) undoDNSRecord(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	var rec map[string]string
	if ok, _ := r.Infra(InfraDNS, &rec); !ok {
		return pipeline.Skip("no DNS record was made"), nil
	}
	var lb LoadBalancer
	_, _ = r.Infra(InfraLoadBalancer, &lb)
	return pipeline.Done(map[string]any{InfraDNS: nil}), d.DeleteDNS(ctx, rec["zoneID"], rec["name"], lb)
}

// ExecChannel is a driver that says how commands reach its VMs (SSM Run Command; SSH with OS
// Login through IAP), which the pool's space records.
type ExecChannel interface {
	ExecMode() string
}

func (p *Pipeline) registerSpace(ctx context.Context, r *pipeline.Run, _ Config, d Driver) (pipeline.Result, error) {
	vms, err := pipeline.InfraOf[[]VM](r, InfraVMs)
	if err != nil {
		return pipeline.Result{}, err
	}
	space := map[string]any{"kind": "vm_pool", "vmCount": len(vms)}
	if ec, ok := d.(ExecChannel); ok {
		space["execMode"] = ec.ExecMode()
	}
	var lb LoadBalancer
	if ok, _ := r.Infra(InfraLoadBalancer, &lb); ok {
		space["endpoint"] = lb.DNSName
	}
	return pipeline.Done(map[string]any{InfraSpace: space}), nil
}

func (p *Pipeline) undoRegisterSpace(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	return pipeline.Done(map[string]any{InfraSpace: nil}), nil
}
