package aws

import (
	"context"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// JobTags is the tag set of a job's resources.
func JobTags(j *job.Job) Tags { return Tags{OrgID: j.OrgID, JobID: j.ID, Extra: j.Tags} }

// VMPoolDriver is the AWS implementation of the vm_pool pipeline's Driver.
type VMPoolDriver struct {
	P *Provider
	// Probe reads the bootstrap sentinel (SSM in production; FakeBootstrapProbe with moto).
	Probe BootstrapProbe
}

var (
	_ vmpool.Driver        = VMPoolDriver{}
	_ vmpool.ConsoleReader = VMPoolDriver{}
	_ vmpool.ExecChannel   = VMPoolDriver{}
	_ vmpool.Roller        = VMPoolDriver{}
)

// ExecMode implements vmpool.ExecChannel: commands reach the VMs through SSM Run Command.
func (VMPoolDriver) ExecMode() string { return "SSM" }

func (d VMPoolDriver) EnsureNetwork(ctx context.Context, j *job.Job, c vmpool.Config) (vmpool.Network, error) {
	n, err := d.P.EnsureNetwork(ctx, NetworkSpec{Tags: JobTags(j), ExistingVPCID: c.VPCID, ExistingSubnetIDs: c.SubnetIDs})
	return vmpool.Network{VPCID: n.VPCID, CIDR: n.CIDR, Existing: n.Existing, PublicSubnetIDs: n.PublicSubnetIDs, PrivateSubnetIDs: n.PrivateSubnetIDs, Ready: n.Ready}, err
}

func (d VMPoolDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	return d.P.DeleteNetwork(ctx, JobTags(j))
}

func (d VMPoolDriver) EnsureIAM(ctx context.Context, j *job.Job) (string, error) {
	r, err := d.P.EnsureRole(ctx, RolesFor(job.FamilyVMPool, JobTags(j))[0])
	return r.InstanceProfileARN, err
}

func (d VMPoolDriver) DeleteIAM(ctx context.Context, j *job.Job) error {
	return d.P.DeleteRole(ctx, RolesFor(job.FamilyVMPool, JobTags(j))[0].Tags)
}

func (d VMPoolDriver) spec(j *job.Job, c vmpool.Config, n vmpool.Network, profile string) VMPoolSpec {
	subnets := n.PrivateSubnetIDs
	if len(subnets) == 0 {
		subnets = n.PublicSubnetIDs
	}
	return VMPoolSpec{Tags: JobTags(j), Name: c.Name, InstanceType: c.InstanceType, ImageID: c.ImageID, Mode: c.Mode,
		Min: c.Min, Max: c.Max, Desired: c.Desired, Bare: c.Bare, VPCID: n.VPCID, VPCCIDR: n.CIDR, SubnetIDs: subnets,
		InstanceProfileARN: profile, TargetCPU: c.ScalingPolicy.CPU()}
}

func (d VMPoolDriver) EnsureLaunchTemplate(ctx context.Context, j *job.Job, c vmpool.Config, n vmpool.Network, profile string) (vmpool.LaunchTemplate, error) {
	var out vmpool.LaunchTemplate
	var err error
	if c.CreateLoadBalancer {
		if out.LBSecurityGroupID, err = d.P.EnsureLBSecurityGroup(ctx, JobTags(j), n.VPCID, c.ListenerPorts); err != nil {
			return out, err
		}
	}
	if out.VMSecurityGroupID, err = d.P.EnsureVMSecurityGroup(ctx, JobTags(j), n.VPCID, n.CIDR, out.LBSecurityGroupID); err != nil {
		return out, err
	}
	lt, err := d.P.EnsureLaunchTemplate(ctx, d.spec(j, c, n, profile), out.VMSecurityGroupID)
	out.ID, out.Version = lt.ID, lt.Version
	return out, err
}

// DeleteLaunchTemplate removes the template and both security groups (the VMs are gone by now;
// the LB group goes last because the VM group referenced it).
func (d VMPoolDriver) DeleteLaunchTemplate(ctx context.Context, j *job.Job) error {
	if err := d.P.DeleteLaunchTemplate(ctx, JobTags(j)); err != nil {
		return err
	}
	return d.P.DeleteSecurityGroups(ctx, JobTags(j), "vm-sg", "lb-sg")
}

func (d VMPoolDriver) EnsureVMs(ctx context.Context, j *job.Job, c vmpool.Config, n vmpool.Network, lt vmpool.LaunchTemplate) ([]vmpool.VM, error) {
	vms, err := d.P.EnsureVMs(ctx, d.spec(j, c, n, ""), LaunchTemplate{ID: lt.ID, Version: lt.Version})
	return toPoolVMs(vms), err
}

func (d VMPoolDriver) CheckBootstrap(ctx context.Context, vms []vmpool.VM) ([]vmpool.VM, bool, error) {
	in := make([]VM, len(vms))
	for i, v := range vms {
		in[i] = VM{ID: v.ID, PrivateIP: v.PrivateIP, State: v.State}
	}
	out, all, err := CheckBootstrap(ctx, d.Probe, in)
	return toPoolVMs(out), all, err
}

// ConsoleOutput implements vmpool.ConsoleReader (Provider.ConsoleOutput).
func (d VMPoolDriver) ConsoleOutput(ctx context.Context, vm vmpool.VM) (string, error) {
	return d.P.ConsoleOutput(ctx, vm.ID)
}

func toPoolVMs(vms []VM) []vmpool.VM {
	out := make([]vmpool.VM, len(vms))
	for i, v := range vms {
		out[i] = vmpool.VM{ID: v.ID, PrivateIP: v.PrivateIP, State: v.State}
	}
	return out
}

func fromPoolVMs(vms []vmpool.VM) []VM {
	out := make([]VM, len(vms))
	for i, v := range vms {
		out[i] = VM{ID: v.ID, PrivateIP: v.PrivateIP, State: v.State}
	}
	return out
}

func (d VMPoolDriver) DeleteVMs(ctx context.Context, j *job.Job) (bool, error) {
	return d.P.DeleteVMs(ctx, JobTags(j))
}

// Resize patches the ASG's sizes and puts the config's scaling policy back on it, so that a
// resize never loses the policy (nor keeps one the config no longer has).
func (d VMPoolDriver) Resize(ctx context.Context, j *job.Job, min, max, desired int32) error {
	if err := d.P.ResizeASG(ctx, JobTags(j), min, max, desired); err != nil {
		return err
	}
	c, err := vmpool.DecodeConfig(j.Config)
	if err != nil {
		return fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	return d.P.EnsureScalingPolicy(ctx, JobTags(j), c.ScalingPolicy.CPU())
}

// RollStep implements vmpool.Roller (Provider.RollStep).
func (d VMPoolDriver) RollStep(ctx context.Context, j *job.Job, c vmpool.Config, targetGroup string) (vmpool.RollStatus, error) {
	spec := RollSpec{Tags: JobTags(j), Name: c.Name, Mode: c.Mode, Slots: c.Desired, Max: c.Max, TargetGroupARN: targetGroup}
	if c.WaitsForBootstrap() {
		spec.Probe = d.Probe
	}
	st, err := d.P.RollStep(ctx, spec)
	out := vmpool.RollStatus{Version: st.Version, Total: st.Total, Replaced: st.Replaced, Done: st.Done, Waiting: st.Waiting}
	if err != nil || !st.Done {
		return out, err
	}
	// Every instance passed the roll's readiness check (healthy, or running and bootstrapped).
	vms, err := d.P.ListVMs(ctx, JobTags(j))
	for i := range vms {
		if vms[i].State == VMBootstrap {
			vms[i].State = VMReady
		}
	}
	out.VMs = toPoolVMs(vms)
	return out, err
}

func (d VMPoolDriver) lbSpec(j *job.Job, c vmpool.Config, n vmpool.Network, sg string) LBSpec {
	return LBSpec{Tags: JobTags(j), VPCID: n.VPCID, PublicSubnetIDs: n.PublicSubnetIDs, SecurityGroupID: sg,
		ListenerPorts: c.ListenerPorts, HealthPath: c.HealthCheckPath, HealthPort: c.HealthCheckPort,
		CertificateARN: c.CertificateARN, Domain: c.Domain}
}

func (d VMPoolDriver) EnsureLoadBalancer(ctx context.Context, j *job.Job, c vmpool.Config, n vmpool.Network, lt vmpool.LaunchTemplate) (vmpool.LoadBalancer, error) {
	lb, err := d.P.EnsureLoadBalancer(ctx, d.lbSpec(j, c, n, lt.LBSecurityGroupID))
	return vmpool.LoadBalancer{ID: lb.ARN, DNSName: lb.DNSName, ZoneID: lb.ZoneID, Ready: lb.Ready}, err
}

func (d VMPoolDriver) EnsureTargetGroup(ctx context.Context, j *job.Job, c vmpool.Config, n vmpool.Network) (string, error) {
	return d.P.EnsureTargetGroup(ctx, d.lbSpec(j, c, n, ""))
}

// HealthCheckFields: a target group's health check path and port both change in place.
func (d VMPoolDriver) HealthCheckFields() []string {
	return []string{"healthCheckPath", "healthCheckPort"}
}

// SetHealthCheck sets the pool's target group's health check to the config's, sending only
// what differs, so a call made again after a crash sends nothing twice.
func (d VMPoolDriver) SetHealthCheck(ctx context.Context, j *job.Job, c vmpool.Config) error {
	return d.P.SetTargetGroupHealthCheck(ctx, d.lbSpec(j, c, vmpool.Network{}, ""))
}

func (d VMPoolDriver) EnsureListeners(ctx context.Context, j *job.Job, c vmpool.Config, lb vmpool.LoadBalancer) (vmpool.LoadBalancer, error) {
	var err error
	if containsPort(c.ListenerPorts, 443) {
		if lb.CertificateID, lb.SelfSigned, err = d.P.EnsureCertificate(ctx, JobTags(j), c.CertificateARN, c.Domain); err != nil {
			return lb, err
		}
	}
	spec := LBSpec{Tags: JobTags(j), ListenerPorts: c.ListenerPorts}
	lb.ListenerIDs, err = d.P.EnsureListeners(ctx, spec, lb.ID, lb.TargetGroupID, lb.CertificateID)
	return lb, err
}

func containsPort(ports []int32, p int32) bool {
	for _, x := range ports {
		if x == p {
			return true
		}
	}
	return false
}

func (d VMPoolDriver) DeleteLoadBalancer(ctx context.Context, j *job.Job) error {
	return d.P.DeleteALB(ctx, JobTags(j))
}

func (d VMPoolDriver) DeleteTargetGroup(ctx context.Context, j *job.Job) error {
	return d.P.DeleteTargetGroup(ctx, JobTags(j))
}

func (d VMPoolDriver) DeleteListeners(ctx context.Context, j *job.Job) error {
	return d.P.DeleteListeners(ctx, JobTags(j))
}

func (d VMPoolDriver) AttachLB(ctx context.Context, j *job.Job, c vmpool.Config, tg string, vms []vmpool.VM) error {
	return d.P.AttachLB(ctx, JobTags(j), c.Mode, tg, fromPoolVMs(vms))
}

func (d VMPoolDriver) DetachLB(ctx context.Context, j *job.Job, c vmpool.Config, tg string, vms []vmpool.VM) error {
	return d.P.DetachLB(ctx, JobTags(j), c.Mode, tg, fromPoolVMs(vms))
}

func (d VMPoolDriver) UpsertDNS(ctx context.Context, zoneID, name string, lb vmpool.LoadBalancer) error {
	return d.P.UpsertRecord(ctx, zoneID, Record{Name: name, Type: "A", AliasDNSName: lb.DNSName, AliasZoneID: lb.ZoneID})
}

func (d VMPoolDriver) DeleteDNS(ctx context.Context, zoneID, name string, lb vmpool.LoadBalancer) error {
	return d.P.DeleteRecord(ctx, zoneID, Record{Name: name, Type: "A", AliasDNSName: lb.DNSName, AliasZoneID: lb.ZoneID})
}
