package gcp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	crm "google.golang.org/api/cloudresourcemanager/v3"
	compute "google.golang.org/api/compute/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/provider/aws/cloudinit"
	"github.com/groundworkhq/groundwork/internal/provider/selfsigned"
)

// Name roles of a VM pool's resources.
const (
	roleVMs      = "vm"
	roleTemplate = "template"
	roleMIG      = "mig"
	roleGroup    = "group"
	roleLBIP     = "lb-ip"
	roleHealth   = "hc"
	roleBackend  = "backend"
	roleURLMap   = "urlmap"
	roleCert     = "cert"
	roleHTTP     = "http"
	roleHTTPS    = "https"
	rolePoolHC   = "pool-hc"
	rolePoolIAP  = "pool-iap"
)

// VMRoles are the predefined roles a pool's VMs' service account holds on the project: the
// logs and metrics of the Ops Agent, nothing more.
var VMRoles = []string{"roles/logging.logWriter", "roles/monitoring.metricWriter"}

// iapRange is where Identity-Aware Proxy's TCP forwarding comes from: OS Login over IAP is a
// pool's exec channel, and its VMs have no external address.
const iapRange = "35.235.240.0/20"

// defaultImage is the image a pool boots when the config names none: a Debian whose
// cloud-init reads GCE's user-data metadata.
const defaultImage = "projects/debian-cloud/global/images/family/debian-12"

// reportBootstrap is the command a VM's cloud-init runs once its sentinel is written: it
// sets the guest attribute CheckBootstrap reads through the Compute API, so readiness needs
// neither an agent nor a way into the VM.
const reportBootstrap = `curl -sf -X PUT --data ready -H "Metadata-Flavor: Google" ` +
	`http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/groundwork/bootstrap`

// VMPoolDriver makes a job's VM pool on Compute Engine: an instance template carrying the
// same cloud-init as every Groundwork VM, fixed instances in the region's default zone
// (mode fixed) or a regional managed instance group with an autoscaler (mode asg), none
// with an external address, OS Login on. With a load balancer: a global external
// Application Load Balancer (address, health check on healthCheckPath and healthCheckPort,
// backend service, URL map, target proxies, forwarding rules, and a Google-managed
// certificate for a domain or a self-managed one otherwise).
//
// The pipeline keeps no operations for this family between calls, so each call reads the
// resources again: one not there yet is inserted under the requestId of its job and key, and
// an insert re-sent while the first is under way is answered with the first's operation.
type VMPoolDriver struct{ C *Client }

var (
	_ vmpool.Driver        = VMPoolDriver{}
	_ vmpool.ConsoleReader = VMPoolDriver{}
	_ vmpool.ExecChannel   = VMPoolDriver{}
)

// ExecMode implements vmpool.ExecChannel: SSH with OS Login through Identity-Aware Proxy's
// TCP forwarding, as the VMs have no external address.
func (VMPoolDriver) ExecMode() string { return "OSLogin+IAP" }

// VMPoolDriver implements provider.VMPoolDrivers.
func (m *Module) VMPoolDriver(ctx context.Context, j *job.Job) (vmpool.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return VMPoolDriver{C: c}, nil
}

func (d VMPoolDriver) global(kind, n string) string {
	return "projects/" + d.C.ProjectID + "/global/" + kind + "/" + n
}

// resource is a compute resource of the job that marks itself in its description.
func (d VMPoolDriver) resource(s *compute.Service, j *job.Job, key, what string,
	get func(ctx context.Context) (string, error),
	insert, del func(ctx context.Context, rid string) (*compute.Operation, error),
) Resource {
	return NetworkDriver{C: d.C}.computeResource(s, j, key, what, get, insert, del)
}

// converge and remove resources in order, each done before the next starts; the pipeline
// keeps no operations for this family, so a call's operations are forgotten when it returns.
func (d VMPoolDriver) ensureAll(ctx context.Context, rs ...keyed) (bool, error) {
	for _, r := range rs {
		if done, err := d.C.converge(ctx, Ops{}, r.key, r.r); err != nil || !done {
			return false, err
		}
	}
	return true, nil
}

func (d VMPoolDriver) removeAll(ctx context.Context, rs ...keyed) (bool, error) {
	for _, r := range rs {
		if gone, err := d.C.remove(ctx, Ops{}, r.key, r.r); err != nil || !gone {
			return false, err
		}
	}
	return true, nil
}

// awaitAll is ensureAll (or removeAll) waited out within the call, for the steps whose
// pipeline call has no wait of its own.
func (d VMPoolDriver) awaitAll(ctx context.Context, what string, remove bool, rs ...keyed) error {
	return d.C.await(ctx, what, func() (bool, error) {
		if remove {
			return d.removeAll(ctx, rs...)
		}
		return d.ensureAll(ctx, rs...)
	})
}

type keyed struct {
	key string
	r   Resource
}

// EnsureNetwork implements vmpool.Driver: the job's network (as the network family makes
// it, with Cloud NAT for the VMs' way out and without private services access), or the
// network the config names.
func (d VMPoolDriver) EnsureNetwork(ctx context.Context, j *job.Job, c vmpool.Config) (vmpool.Network, error) {
	nd := NetworkDriver{C: d.C}
	if c.VPCID != "" {
		res, err := nd.adopt(ctx, network.Config{VPCID: c.VPCID, SubnetIDs: c.SubnetIDs})
		if err != nil {
			return vmpool.Network{}, err
		}
		n := networkOf(res)
		return vmpool.Network{VPCID: res.VPCID, CIDR: n.CIDR, Existing: true, PrivateSubnetIDs: n.SubnetIDs, Ready: res.Ready}, nil
	}
	res, err := nd.ensure(ctx, j, network.Config{CIDR: "10.0.0.0/16"}, false)
	if err != nil {
		return vmpool.Network{}, err
	}
	n := networkOf(res)
	return vmpool.Network{VPCID: res.VPCID, CIDR: n.CIDR, PrivateSubnetIDs: n.SubnetIDs, Ready: res.Ready}, nil
}

// DeleteNetwork implements vmpool.Driver.
func (d VMPoolDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	c, _ := vmpool.DecodeConfig(j.Config)
	if c.VPCID != "" {
		return true, nil
	}
	// The pool's network was made without private services access (EnsureNetwork).
	return NetworkDriver{C: d.C}.deleteNetwork(ctx, j, teardown{})
}

// EnsureIAM implements vmpool.Driver: the VMs' service account with VMRoles on the project;
// its email is what the template runs the VMs as.
func (d VMPoolDriver) EnsureIAM(ctx context.Context, j *job.Job) (string, error) {
	s, err := d.C.iamService(ctx)
	if err != nil {
		return "", err
	}
	email, err := d.C.ensureAccount(ctx, s, j, roleVMs)
	if err != nil {
		return "", err
	}
	if err := d.C.editPolicy(ctx, func(p *crm.Policy) bool { return grantAll(p, VMRoles, "serviceAccount:"+email) }); err != nil {
		return "", err
	}
	return email, nil
}

// DeleteIAM implements vmpool.Driver.
func (d VMPoolDriver) DeleteIAM(ctx context.Context, j *job.Job) error {
	return d.C.deleteAccounts(ctx, j, []account{{role: roleVMs, roles: VMRoles}})
}

// vmTag is the network tag of the pool's VMs, which its firewall rules target.
func vmTag(j *job.Job) string { return name(j, roleVMs) }

// firewallRules are the pool's own rules on its network: the load balancer's health checks
// (and its proxies, which come from the same ranges) to the health-check port, and IAP's
// TCP forwarding to SSH, OS Login's way in. A network the pool made allows the health
// checks already; an adopted one may not, so the pool brings its own rule either way.
func (d VMPoolDriver) firewallRules(j *job.Job, c vmpool.Config, netLink string) []*compute.Firewall {
	tag := []string{vmTag(j)}
	return []*compute.Firewall{
		{Name: name(j, rolePoolHC), Network: netLink, Direction: "INGRESS", Description: description(j, rolePoolHC),
			SourceRanges: healthCheckRanges, TargetTags: tag,
			Allowed: []*compute.FirewallAllowed{{IPProtocol: "tcp", Ports: []string{strconv.Itoa(int(c.HealthCheckPort))}}}},
		{Name: name(j, rolePoolIAP), Network: netLink, Direction: "INGRESS", Description: description(j, rolePoolIAP),
			SourceRanges: []string{iapRange}, TargetTags: tag,
			Allowed: []*compute.FirewallAllowed{{IPProtocol: "tcp", Ports: []string{"22"}}}},
	}
}

func (d VMPoolDriver) firewalls(s *compute.Service, j *job.Job, c vmpool.Config, netLink string) []keyed {
	var out []keyed
	for _, fw := range d.firewallRules(j, c, netLink) {
		fw := fw
		out = append(out, keyed{"firewall " + fw.Name, d.resource(s, j, "firewall "+fw.Name, "firewall rule "+fw.Name,
			func(ctx context.Context) (string, error) {
				v, err := s.Firewalls.Get(d.C.ProjectID, fw.Name).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.Firewalls.Insert(d.C.ProjectID, fw).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.Firewalls.Delete(d.C.ProjectID, fw.Name).RequestId(rid).Context(ctx).Do()
			})})
	}
	return out
}

func (d VMPoolDriver) template(s *compute.Service, j *job.Job, tname string, c vmpool.Config, n vmpool.Network, sa string) (keyed, error) {
	var props *compute.InstanceProperties
	if c.InstanceType != "" {
		userData, err := cloudinit.Render(cloudinit.Options{Bare: c.Bare, JobID: j.ID, Report: reportBootstrap})
		if err != nil {
			return keyed{}, fault.System(err)
		}
		image := c.ImageID
		if image == "" {
			image = defaultImage
		}
		nic := &compute.NetworkInterface{Network: selfLink(strings.TrimPrefix(n.VPCID, "/"))}
		if len(n.PrivateSubnetIDs) > 0 {
			nic.Subnetwork = selfLink(n.PrivateSubnetIDs[0])
		}
		t := "true"
		props = &compute.InstanceProperties{MachineType: c.InstanceType, Labels: labels(j, roleVMs),
			Tags:              &compute.Tags{Items: []string{vmTag(j)}},
			NetworkInterfaces: []*compute.NetworkInterface{nic},
			Disks: []*compute.AttachedDisk{{Boot: true, AutoDelete: true, Type: "PERSISTENT",
				InitializeParams: &compute.AttachedDiskInitializeParams{SourceImage: image, DiskSizeGb: 20}}},
			Metadata: &compute.Metadata{Items: []*compute.MetadataItems{
				{Key: "user-data", Value: &userData}, {Key: "enable-oslogin", Value: &t}, {Key: "enable-guest-attributes", Value: &t}}},
			ShieldedInstanceConfig: &compute.ShieldedInstanceConfig{EnableSecureBoot: true, EnableVtpm: true, EnableIntegrityMonitoring: true},
		}
		if sa != "" {
			props.ServiceAccounts = []*compute.ServiceAccount{{Email: sa, Scopes: []string{Scope}}}
		}
	}
	return keyed{"template " + tname, d.resource(s, j, "template "+tname, "instance template "+tname,
		func(ctx context.Context) (string, error) {
			v, err := s.InstanceTemplates.Get(d.C.ProjectID, tname).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.InstanceTemplates.Insert(d.C.ProjectID, &compute.InstanceTemplate{Name: tname, Description: description(j, roleTemplate),
				Properties: props}).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.InstanceTemplates.Delete(d.C.ProjectID, tname).RequestId(rid).Context(ctx).Do()
		})}, nil
}

// EnsureLaunchTemplate implements vmpool.Driver: the pool's firewall rules and its instance
// template. VMSecurityGroupID records the VMs' network tag, which the rules target.
func (d VMPoolDriver) EnsureLaunchTemplate(ctx context.Context, j *job.Job, c vmpool.Config, n vmpool.Network, sa string) (vmpool.LaunchTemplate, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return vmpool.LaunchTemplate{}, err
	}
	tname, version := templateName(j, c)
	t, err := d.template(s, j, tname, c, n, sa)
	if err != nil {
		return vmpool.LaunchTemplate{}, err
	}
	rs := append(d.firewalls(s, j, c, selfLink(strings.TrimPrefix(n.VPCID, "/"))), t)
	if err := d.awaitAll(ctx, "instance template of "+j.ID, false, rs...); err != nil {
		return vmpool.LaunchTemplate{}, err
	}
	return vmpool.LaunchTemplate{ID: d.global("instanceTemplates", tname), Version: version, VMSecurityGroupID: vmTag(j)}, nil
}

// DeleteLaunchTemplate implements vmpool.Driver: every template of the job (each template
// change made one), then the firewall rules.
func (d VMPoolDriver) DeleteLaunchTemplate(ctx context.Context, j *job.Job) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	c, _ := vmpool.DecodeConfig(j.Config)
	names, err := d.jobTemplates(ctx, s, j)
	if err != nil {
		return err
	}
	var rs []keyed
	for _, n := range names {
		t, err := d.template(s, j, n, vmpool.Config{}, vmpool.Network{}, "")
		if err != nil {
			return err
		}
		rs = append(rs, t)
	}
	rs = append(rs, d.firewalls(s, j, c, "")...)
	return d.awaitAll(ctx, "deleting the instance templates of "+j.ID, true, rs...)
}

// vmID is how a VM is recorded: its zone and name, which every instance call needs.
func vmID(zone, n string) string { return "zones/" + zone + "/instances/" + n }

func parseVMID(id string) (zone, n string, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[0] != "zones" || parts[2] != "instances" {
		return "", "", false
	}
	return parts[1], parts[3], true
}

// lastSegment is what follows a link's last slash.
func lastSegment(s string) string { return s[strings.LastIndex(s, "/")+1:] }

// vmState is a VM's lifecycle state from its instance status: a RUNNING VM is in bootstrap
// until CheckBootstrap sees its guest attribute.
func vmState(status string) string {
	switch status {
	case "RUNNING":
		return "bootstrap"
	case "STOPPING", "STOPPED", "SUSPENDED", "TERMINATED":
		return "stopped"
	}
	return "pending"
}

func (d VMPoolDriver) vmOf(inst *compute.Instance) vmpool.VM {
	v := vmpool.VM{ID: vmID(lastSegment(inst.Zone), inst.Name), State: vmState(inst.Status)}
	if len(inst.NetworkInterfaces) > 0 {
		v.PrivateIP = inst.NetworkInterfaces[0].NetworkIP
	}
	return v
}

func (d VMPoolDriver) mig(s *compute.Service, j *job.Job, c vmpool.Config, tmpl string) []keyed {
	p, region := d.C.ProjectID, d.C.Region
	// The autoscaler is named as its group: they are one thing to the user.
	mname, aname := name(j, roleMIG), name(j, roleMIG)
	migLink := selfLink("projects/" + p + "/regions/" + region + "/instanceGroupManagers/" + mname)
	return []keyed{
		{"mig", d.resource(s, j, "mig", "instance group manager "+mname,
			func(ctx context.Context) (string, error) {
				v, err := s.RegionInstanceGroupManagers.Get(p, region, mname).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.RegionInstanceGroupManagers.Insert(p, region, &compute.InstanceGroupManager{Name: mname,
					Description: description(j, roleMIG), BaseInstanceName: name(j, roleVMs), InstanceTemplate: selfLink(tmpl),
					TargetSize: int64(c.Desired), NamedPorts: []*compute.NamedPort{{Name: "http", Port: int64(c.HealthCheckPort)}},
					ForceSendFields: []string{"TargetSize"}}).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.RegionInstanceGroupManagers.Delete(p, region, mname).RequestId(rid).Context(ctx).Do()
			})},
		{"autoscaler", d.resource(s, j, "autoscaler", "autoscaler "+aname,
			func(ctx context.Context) (string, error) {
				v, err := s.RegionAutoscalers.Get(p, region, aname).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.RegionAutoscalers.Insert(p, region, &compute.Autoscaler{Name: aname, Description: description(j, "autoscaler"),
					Target: migLink, AutoscalingPolicy: autoscaling(c.Min, c.Max, c.ScalingPolicy.CPU())}).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.RegionAutoscalers.Delete(p, region, aname).RequestId(rid).Context(ctx).Do()
			})},
	}
}

// defaultCPUTarget is the CPU utilization a pool without a scalingPolicy is scaled on.
const defaultCPUTarget = 0.6

// autoscaling is a pool's autoscaling policy: between min and max, keeping the group's
// average CPU at targetCPU percent (0: defaultCPUTarget).
func autoscaling(min, max int32, targetCPU float64) *compute.AutoscalingPolicy {
	target := defaultCPUTarget
	if targetCPU > 0 {
		target = targetCPU / 100
	}
	return &compute.AutoscalingPolicy{MinNumReplicas: int64(min), MaxNumReplicas: int64(max), CoolDownPeriodSec: 90,
		CpuUtilization: &compute.AutoscalingPolicyCpuUtilization{UtilizationTarget: target}, ForceSendFields: []string{"MinNumReplicas"}}
}

func (d VMPoolDriver) instance(s *compute.Service, j *job.Job, i int, tmpl string) keyed {
	return d.instanceNamed(s, j, fmt.Sprintf("%s-%d", name(j, roleVMs), i), tmpl)
}

// EnsureVMs implements vmpool.Driver: desired instances from the template in the region's
// default zone (fixed), or the managed instance group and its autoscaler (asg). The VMs it
// returns are those that exist so far; the step waits until there are desired of them.
func (d VMPoolDriver) EnsureVMs(ctx context.Context, j *job.Job, c vmpool.Config, _ vmpool.Network, lt vmpool.LaunchTemplate) ([]vmpool.VM, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return nil, err
	}
	if c.Mode == "asg" {
		// No VM counts until the group and its autoscaler are both made: the step waits
		// while fewer than desired VMs are returned.
		if done, err := d.ensureAll(ctx, d.mig(s, j, c, lt.ID)...); err != nil || !done {
			return nil, err
		}
		return d.migVMs(ctx, s, j)
	}
	// A slot holds whatever instance it has, whichever template it was made from (a roll
	// replaces it); an empty slot gets an instance from the template. Each on its own: one
	// still being made does not hold back the others' inserts.
	bySlot, err := d.poolInstances(ctx, s, j)
	if err != nil {
		return nil, err
	}
	made := false
	for i := range int(c.Desired) {
		if len(bySlot[i]) > 0 {
			continue
		}
		r := d.instance(s, j, i, lt.ID)
		if _, err := d.C.converge(ctx, Ops{}, r.key, r.r); err != nil {
			return nil, err
		}
		made = true
	}
	if made {
		if bySlot, err = d.poolInstances(ctx, s, j); err != nil {
			return nil, err
		}
	}
	var out []vmpool.VM
	for i := range int(c.Desired) {
		if l := bySlot[i]; len(l) > 0 {
			// The newest of a slot mid-roll: the one on the template named last.
			out = append(out, d.vmOf(l[len(l)-1]))
		}
	}
	return out, nil
}

// migVMs are the managed instance group's instances, read one by one for their address.
func (d VMPoolDriver) migVMs(ctx context.Context, s *compute.Service, j *job.Job) ([]vmpool.VM, error) {
	list, err := s.RegionInstanceGroupManagers.ListManagedInstances(d.C.ProjectID, d.C.Region, name(j, roleMIG)).Context(ctx).Do()
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, d.C.Classify(err)
	}
	var out []vmpool.VM
	for _, mi := range list.ManagedInstances {
		zone, iname := lastSegment(strings.TrimSuffix(mi.Instance[:strings.LastIndex(mi.Instance, "/instances/")], "/")), lastSegment(mi.Instance)
		inst, err := s.Instances.Get(d.C.ProjectID, zone, iname).Context(ctx).Do()
		if notFound(err) {
			continue
		}
		if err != nil {
			return nil, d.C.Classify(err)
		}
		out = append(out, d.vmOf(inst))
	}
	return out, nil
}

// CheckBootstrap implements vmpool.Driver: a VM is ready once its cloud-init set the
// groundwork/bootstrap guest attribute (reportBootstrap).
func (d VMPoolDriver) CheckBootstrap(ctx context.Context, vms []vmpool.VM) ([]vmpool.VM, bool, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return vms, false, err
	}
	all := len(vms) > 0
	out := append([]vmpool.VM(nil), vms...)
	for i := range out {
		if out[i].State != "bootstrap" {
			all = all && out[i].State == "ready"
			continue
		}
		zone, iname, ok := parseVMID(out[i].ID)
		if !ok {
			return out, false, fault.System(fmt.Errorf("VM id %q is not zones/<zone>/instances/<name>", out[i].ID))
		}
		ga, err := s.Instances.GetGuestAttributes(d.C.ProjectID, zone, iname).QueryPath("groundwork/").Context(ctx).Do()
		if notFound(err) {
			all = false
			continue
		}
		if err != nil {
			return out, false, d.C.Classify(err)
		}
		ready := false
		if ga.QueryValue != nil {
			for _, it := range ga.QueryValue.Items {
				ready = ready || it.Namespace == "groundwork" && it.Key == "bootstrap" && it.Value == "ready"
			}
		}
		if ready {
			out[i].State = "ready"
		} else {
			all = false
		}
	}
	return out, all, nil
}

// consoleTailBytes is how much of a VM's console output ConsoleOutput asks for: the end of
// it, which is where a stuck bootstrap shows.
const consoleTailBytes = 16 << 10

// ConsoleOutput implements vmpool.ConsoleReader: the end of what the VM wrote to its serial
// port 1, its console (a negative start counts back from the end of the output).
func (d VMPoolDriver) ConsoleOutput(ctx context.Context, vm vmpool.VM) (string, error) {
	zone, iname, ok := parseVMID(vm.ID)
	if !ok {
		return "", fault.System(fmt.Errorf("VM id %q is not zones/<zone>/instances/<name>", vm.ID))
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return "", err
	}
	out, err := s.Instances.GetSerialPortOutput(d.C.ProjectID, zone, iname).Port(1).Start(-consoleTailBytes).Context(ctx).Do()
	if err != nil {
		return "", d.C.Classify(err)
	}
	return out.Contents, nil
}

// DeleteVMs implements vmpool.Driver: the autoscaler and the group (its instances go with
// it), and the fixed instances; done once none is left.
func (d VMPoolDriver) DeleteVMs(ctx context.Context, j *job.Job) (bool, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return false, err
	}
	c, _ := vmpool.DecodeConfig(j.Config)
	mig := d.mig(s, j, c, "")
	if gone, err := d.removeAll(ctx, mig[1], mig[0]); err != nil || !gone {
		return false, err
	}
	// Every instance of the job's fixed pool, whatever its slot or template.
	bySlot, err := d.poolInstances(ctx, s, j)
	if err != nil {
		return false, err
	}
	all := true
	for _, l := range bySlot {
		for _, in := range l {
			r := d.instanceNamed(s, j, in.Name, "")
			gone, err := d.C.remove(ctx, Ops{}, r.key, r.r)
			if err != nil {
				return false, err
			}
			all = all && gone
		}
	}
	return all, nil
}

// Resize implements vmpool.Driver for managed pools: the autoscaler's bounds and CPU target
// (the config's scalingPolicy), and the group's size. Each is read first and changed only
// when it differs, under a requestId naming the change and the state it changes, so a call
// after a crash sends nothing twice and a later change back to an earlier size is sent anew.
func (d VMPoolDriver) Resize(ctx context.Context, j *job.Job, min, max, desired int32) error {
	c, _ := vmpool.DecodeConfig(j.Config)
	if c.Mode != "asg" {
		return fault.UserAction(fmt.Errorf("job %s is a fixed pool", j.ID), "FixedPool",
			"A fixed pool's size is its config; make the pool with mode asg to resize it.", "")
	}
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	p, region, n := d.C.ProjectID, d.C.Region, name(j, roleMIG)
	want := autoscaling(min, max, c.ScalingPolicy.CPU())
	as, err := s.RegionAutoscalers.Get(p, region, n).Context(ctx).Do()
	if err != nil {
		return d.C.Classify(err)
	}
	if have := as.AutoscalingPolicy; have == nil || have.MinNumReplicas != want.MinNumReplicas || have.MaxNumReplicas != want.MaxNumReplicas ||
		have.CpuUtilization == nil || have.CpuUtilization.UtilizationTarget != want.CpuUtilization.UtilizationTarget {
		key := fmt.Sprintf("autoscaler %d-%d cpu %v from %s", min, max, want.CpuUtilization.UtilizationTarget, policyKey(have))
		if _, err := sendOnce(ctx, j, key, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.RegionAutoscalers.Patch(p, region, &compute.Autoscaler{Name: n, AutoscalingPolicy: want}).
				Autoscaler(n).RequestId(rid).Context(ctx).Do()
		}); err != nil {
			return d.C.Classify(err)
		}
	}
	mig, err := s.RegionInstanceGroupManagers.Get(p, region, n).Context(ctx).Do()
	if err != nil {
		return d.C.Classify(err)
	}
	if mig.TargetSize == int64(desired) {
		return nil
	}
	_, err = sendOnce(ctx, j, fmt.Sprintf("resize %d from %d %s", desired, mig.TargetSize, mig.Fingerprint), func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.RegionInstanceGroupManagers.Resize(p, region, n, int64(desired)).RequestId(rid).Context(ctx).Do()
	})
	return d.C.Classify(err)
}

// policyKey is an autoscaling policy as a requestId key's part.
func policyKey(p *compute.AutoscalingPolicy) string {
	if p == nil {
		return "none"
	}
	cpu := 0.0
	if p.CpuUtilization != nil {
		cpu = p.CpuUtilization.UtilizationTarget
	}
	return fmt.Sprintf("%d-%d cpu %v", p.MinNumReplicas, p.MaxNumReplicas, cpu)
}

// The load balancer: a global external Application Load Balancer.
//   - EnsureLoadBalancer reserves its global address (the pool's public IP; DNSName records
//     it, as a DNS record's value).
//   - EnsureTargetGroup makes the health check and the backend service; AttachLB puts the
//     pool behind it: the managed group itself (asg), or an unmanaged instance group of the
//     fixed instances.
//   - EnsureListeners makes the URL map and, per listener port, a target proxy and a global
//     forwarding rule on the address; 443 with a certificate: the one the config names
//     (certificateArn: an SSL certificate's name or self link), a Google-managed one for
//     the domain, or a self-managed self-signed one when there is neither.

func (d VMPoolDriver) address(s *compute.Service, j *job.Job) keyed {
	p, n := d.C.ProjectID, name(j, roleLBIP)
	return keyed{"lb address", d.resource(s, j, "lb address", "address "+n,
		func(ctx context.Context) (string, error) {
			v, err := s.GlobalAddresses.Get(p, n).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.GlobalAddresses.Insert(p, &compute.Address{Name: n, Description: description(j, roleLBIP),
				AddressType: "EXTERNAL", IpVersion: "IPV4", Labels: labels(j, roleLBIP)}).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.GlobalAddresses.Delete(p, n).RequestId(rid).Context(ctx).Do()
		})}
}

// EnsureLoadBalancer implements vmpool.Driver.
func (d VMPoolDriver) EnsureLoadBalancer(ctx context.Context, j *job.Job, _ vmpool.Config, _ vmpool.Network, _ vmpool.LaunchTemplate) (vmpool.LoadBalancer, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return vmpool.LoadBalancer{}, err
	}
	ready, err := d.ensureAll(ctx, d.address(s, j))
	if err != nil || !ready {
		return vmpool.LoadBalancer{ID: d.global("addresses", name(j, roleLBIP))}, err
	}
	a, err := s.GlobalAddresses.Get(d.C.ProjectID, name(j, roleLBIP)).Context(ctx).Do()
	if err != nil {
		return vmpool.LoadBalancer{}, d.C.Classify(err)
	}
	return vmpool.LoadBalancer{ID: d.global("addresses", a.Name), DNSName: a.Address, Ready: a.Address != ""}, nil
}

// DeleteLoadBalancer implements vmpool.Driver.
func (d VMPoolDriver) DeleteLoadBalancer(ctx context.Context, j *job.Job) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	return d.awaitAll(ctx, "deleting the address of "+j.ID, true, d.address(s, j))
}

func (d VMPoolDriver) backend(s *compute.Service, j *job.Job, c vmpool.Config) []keyed {
	p := d.C.ProjectID
	hc, bs := name(j, roleHealth), name(j, roleBackend)
	return []keyed{
		{"health check", d.resource(s, j, "health check", "health check "+hc,
			func(ctx context.Context) (string, error) {
				v, err := s.HealthChecks.Get(p, hc).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.HealthChecks.Insert(p, &compute.HealthCheck{Name: hc, Description: description(j, roleHealth), Type: "HTTP",
					CheckIntervalSec: 10, TimeoutSec: 5, HealthyThreshold: 2, UnhealthyThreshold: 3,
					HttpHealthCheck: &compute.HTTPHealthCheck{Port: int64(c.HealthCheckPort), RequestPath: c.HealthCheckPath}}).
					RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.HealthChecks.Delete(p, hc).RequestId(rid).Context(ctx).Do()
			})},
		{"backend service", d.resource(s, j, "backend service", "backend service "+bs,
			func(ctx context.Context) (string, error) {
				v, err := s.BackendServices.Get(p, bs).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.BackendServices.Insert(p, &compute.BackendService{Name: bs, Description: description(j, roleBackend),
					LoadBalancingScheme: "EXTERNAL_MANAGED", Protocol: "HTTP", PortName: "http", TimeoutSec: 30,
					HealthChecks: []string{selfLink(d.global("healthChecks", hc))}}).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.BackendServices.Delete(p, bs).RequestId(rid).Context(ctx).Do()
			})},
	}
}

// EnsureTargetGroup implements vmpool.Driver: the health check and the backend service,
// whose id it returns.
func (d VMPoolDriver) EnsureTargetGroup(ctx context.Context, j *job.Job, c vmpool.Config, _ vmpool.Network) (string, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return "", err
	}
	if err := d.awaitAll(ctx, "backend service of "+j.ID, false, d.backend(s, j, c)...); err != nil {
		return "", err
	}
	return d.global("backendServices", name(j, roleBackend)), nil
}

// DeleteTargetGroup implements vmpool.Driver.
func (d VMPoolDriver) DeleteTargetGroup(ctx context.Context, j *job.Job) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	c, _ := vmpool.DecodeConfig(j.Config)
	b := d.backend(s, j, c)
	return d.awaitAll(ctx, "deleting the backend service of "+j.ID, true, b[1], b[0])
}

// group is a fixed pool's unmanaged instance group, in the zone its instances are in.
func (d VMPoolDriver) group(s *compute.Service, j *job.Job, c vmpool.Config, netLink string) keyed {
	p, zone, g := d.C.ProjectID, d.C.Zone(), name(j, roleGroup)
	return keyed{"instance group", d.resource(s, j, "instance group", "instance group "+g,
		func(ctx context.Context) (string, error) {
			v, err := s.InstanceGroups.Get(p, zone, g).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.InstanceGroups.Insert(p, zone, &compute.InstanceGroup{Name: g, Description: description(j, roleGroup), Network: netLink,
				NamedPorts: []*compute.NamedPort{{Name: "http", Port: int64(c.HealthCheckPort)}}}).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.InstanceGroups.Delete(p, zone, g).RequestId(rid).Context(ctx).Do()
		})}
}

// poolGroup is the instance group the backend service sends to.
func (d VMPoolDriver) poolGroup(j *job.Job, c vmpool.Config) string {
	if c.Mode == "asg" {
		return selfLink("projects/" + d.C.ProjectID + "/regions/" + d.C.Region + "/instanceGroups/" + name(j, roleMIG))
	}
	return selfLink("projects/" + d.C.ProjectID + "/zones/" + d.C.Zone() + "/instanceGroups/" + name(j, roleGroup))
}

// setBackends makes the backend service send to groups (none: to nothing), with one patch
// whose requestId names the change.
func (d VMPoolDriver) setBackends(ctx context.Context, s *compute.Service, j *job.Job, groups []string) error {
	p, bs := d.C.ProjectID, name(j, roleBackend)
	cur, err := s.BackendServices.Get(p, bs).Context(ctx).Do()
	if notFound(err) && len(groups) == 0 {
		return nil
	}
	if err != nil {
		return d.C.Classify(err)
	}
	have := map[string]bool{}
	for _, b := range cur.Backends {
		have[b.Group] = true
	}
	same := len(have) == len(groups)
	for _, g := range groups {
		same = same && have[g]
	}
	if same {
		return nil
	}
	patch := &compute.BackendService{Backends: []*compute.Backend{}, Fingerprint: cur.Fingerprint, ForceSendFields: []string{"Backends"}}
	for _, g := range groups {
		patch.Backends = append(patch.Backends, &compute.Backend{Group: g, BalancingMode: "UTILIZATION", MaxUtilization: 0.8, CapacityScaler: 1})
	}
	key := "backends " + strings.Join(groups, ",")
	return d.C.await(ctx, "backends of "+bs, func() (bool, error) {
		op, err := s.BackendServices.Patch(p, bs, patch).RequestId(requestID(j, key)).Context(ctx).Do()
		if err != nil {
			return false, d.C.Classify(err)
		}
		if op.Status == "DONE" {
			if op.Error != nil {
				return false, d.C.Classify(computeOpError(op))
			}
			return true, nil
		}
		return false, nil
	})
}

// AttachLB implements vmpool.Driver.
func (d VMPoolDriver) AttachLB(ctx context.Context, j *job.Job, c vmpool.Config, _ string, vms []vmpool.VM) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	if c.Mode != "asg" {
		var nl string
		if n, ok := d.poolNetwork(ctx, s, vms); ok {
			nl = n
		}
		if err := d.awaitAll(ctx, "instance group of "+j.ID, false, d.group(s, j, c, nl)); err != nil {
			return err
		}
		var refs []*compute.InstanceReference
		for _, v := range vms {
			if zone, iname, ok := parseVMID(v.ID); ok {
				refs = append(refs, &compute.InstanceReference{Instance: selfLink("projects/" + d.C.ProjectID + "/zones/" + zone + "/instances/" + iname)})
			}
		}
		if err := d.C.await(ctx, "members of the instance group of "+j.ID, func() (bool, error) {
			op, err := s.InstanceGroups.AddInstances(d.C.ProjectID, d.C.Zone(), name(j, roleGroup),
				&compute.InstanceGroupsAddInstancesRequest{Instances: refs}).RequestId(requestID(j, "add instances")).Context(ctx).Do()
			if err != nil {
				return false, d.C.Classify(err)
			}
			if op.Status == "DONE" && op.Error != nil {
				return false, d.C.Classify(computeOpError(op))
			}
			return op.Status == "DONE", nil
		}); err != nil {
			return err
		}
	}
	return d.setBackends(ctx, s, j, []string{d.poolGroup(j, c)})
}

// poolNetwork is the network of the pool's first VM, which an unmanaged group must be in.
func (d VMPoolDriver) poolNetwork(ctx context.Context, s *compute.Service, vms []vmpool.VM) (string, bool) {
	for _, v := range vms {
		zone, iname, ok := parseVMID(v.ID)
		if !ok {
			continue
		}
		inst, err := s.Instances.Get(d.C.ProjectID, zone, iname).Context(ctx).Do()
		if err == nil && len(inst.NetworkInterfaces) > 0 {
			return inst.NetworkInterfaces[0].Network, true
		}
	}
	return "", false
}

// DetachLB implements vmpool.Driver: the backend service sends to nothing, and a fixed
// pool's instance group goes.
func (d VMPoolDriver) DetachLB(ctx context.Context, j *job.Job, c vmpool.Config, _ string, _ []vmpool.VM) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	if err := d.setBackends(ctx, s, j, nil); err != nil {
		return err
	}
	if c.Mode == "asg" {
		return nil
	}
	return d.awaitAll(ctx, "deleting the instance group of "+j.ID, true, d.group(s, j, c, ""))
}

// certificate is the 443 listener's certificate the job makes: Google-managed for a domain,
// else self-managed from a self-signed pair made here. Neither when the config names one.
func (d VMPoolDriver) certificate(s *compute.Service, j *job.Job, c vmpool.Config) keyed {
	p, n := d.C.ProjectID, name(j, roleCert)
	return keyed{"certificate", d.resource(s, j, "certificate", "SSL certificate "+n,
		func(ctx context.Context) (string, error) {
			v, err := s.SslCertificates.Get(p, n).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			cert := &compute.SslCertificate{Name: n, Description: description(j, roleCert)}
			if c.Domain != "" {
				cert.Type = "MANAGED"
				cert.Managed = &compute.SslCertificateManagedSslCertificate{Domains: []string{strings.TrimSuffix(c.Domain, ".")}}
			} else {
				certPEM, keyPEM, err := selfsigned.Certificate("")
				if err != nil {
					return nil, fault.System(err)
				}
				cert.Type, cert.Certificate, cert.PrivateKey = "SELF_MANAGED", string(certPEM), string(keyPEM)
			}
			return s.SslCertificates.Insert(p, cert).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.SslCertificates.Delete(p, n).RequestId(rid).Context(ctx).Do()
		})}
}

// certificateOf is the 443 listener's certificate: the config's, or the job's.
func (d VMPoolDriver) certificateOf(j *job.Job, c vmpool.Config) string {
	if c.CertificateARN != "" {
		if strings.Contains(c.CertificateARN, "/") {
			return selfLink(strings.TrimPrefix(strings.TrimPrefix(c.CertificateARN, "https://www.googleapis.com/compute/v1/"), "/"))
		}
		return selfLink(d.global("sslCertificates", c.CertificateARN))
	}
	return selfLink(d.global("sslCertificates", name(j, roleCert)))
}

// listeners are the URL map and, per port, a target proxy and a forwarding rule.
func (d VMPoolDriver) listeners(s *compute.Service, j *job.Job, c vmpool.Config, ip string) []keyed {
	p, um := d.C.ProjectID, name(j, roleURLMap)
	out := []keyed{{"url map", d.resource(s, j, "url map", "URL map "+um,
		func(ctx context.Context) (string, error) {
			v, err := s.UrlMaps.Get(p, um).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.UrlMaps.Insert(p, &compute.UrlMap{Name: um, Description: description(j, roleURLMap),
				DefaultService: selfLink(d.global("backendServices", name(j, roleBackend)))}).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.UrlMaps.Delete(p, um).RequestId(rid).Context(ctx).Do()
		})}}
	if slices.Contains(c.ListenerPorts, 443) && c.CertificateARN == "" {
		out = append(out, d.certificate(s, j, c))
	}
	for _, port := range []int32{80, 443} {
		if !slices.Contains(c.ListenerPorts, port) {
			continue
		}
		role := roleHTTP
		if port == 443 {
			role = roleHTTPS
		}
		proxy, rule := name(j, role), name(j, role+"-rule")
		proxyKind := "targetHttpProxies"
		if port == 443 {
			proxyKind = "targetHttpsProxies"
		}
		out = append(out, keyed{"proxy " + role, d.resource(s, j, "proxy "+role, "target proxy "+proxy,
			func(ctx context.Context) (string, error) {
				if port == 443 {
					v, err := s.TargetHttpsProxies.Get(p, proxy).Context(ctx).Do()
					if err != nil {
						return "", err
					}
					return v.Description, nil
				}
				v, err := s.TargetHttpProxies.Get(p, proxy).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				if port == 443 {
					return s.TargetHttpsProxies.Insert(p, &compute.TargetHttpsProxy{Name: proxy, Description: description(j, role),
						UrlMap: selfLink(d.global("urlMaps", um)), SslCertificates: []string{d.certificateOf(j, c)}}).RequestId(rid).Context(ctx).Do()
				}
				return s.TargetHttpProxies.Insert(p, &compute.TargetHttpProxy{Name: proxy, Description: description(j, role),
					UrlMap: selfLink(d.global("urlMaps", um))}).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				if port == 443 {
					return s.TargetHttpsProxies.Delete(p, proxy).RequestId(rid).Context(ctx).Do()
				}
				return s.TargetHttpProxies.Delete(p, proxy).RequestId(rid).Context(ctx).Do()
			})})
		out = append(out, keyed{"rule " + role, d.resource(s, j, "rule "+role, "forwarding rule "+rule,
			func(ctx context.Context) (string, error) {
				v, err := s.GlobalForwardingRules.Get(p, rule).Context(ctx).Do()
				if err != nil {
					return "", err
				}
				return v.Description, nil
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.GlobalForwardingRules.Insert(p, &compute.ForwardingRule{Name: rule, Description: description(j, role+"-rule"),
					IPAddress: ip, IPProtocol: "TCP", PortRange: strconv.Itoa(int(port)), LoadBalancingScheme: "EXTERNAL_MANAGED",
					Target: selfLink(d.global(proxyKind, proxy)), Labels: labels(j, role+"-rule")}).RequestId(rid).Context(ctx).Do()
			}, func(ctx context.Context, rid string) (*compute.Operation, error) {
				return s.GlobalForwardingRules.Delete(p, rule).RequestId(rid).Context(ctx).Do()
			})})
	}
	return out
}

// EnsureListeners implements vmpool.Driver.
func (d VMPoolDriver) EnsureListeners(ctx context.Context, j *job.Job, c vmpool.Config, lb vmpool.LoadBalancer) (vmpool.LoadBalancer, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return lb, err
	}
	if _, err := netip.ParseAddr(lb.DNSName); err != nil {
		return lb, fault.System(fmt.Errorf("the load balancer's address %q is not an IP address", lb.DNSName))
	}
	rs := d.listeners(s, j, c, lb.DNSName)
	if err := d.awaitAll(ctx, "listeners of "+j.ID, false, rs...); err != nil {
		return lb, err
	}
	lb.ListenerIDs = nil
	for _, r := range rs {
		if strings.HasPrefix(r.key, "rule ") {
			lb.ListenerIDs = append(lb.ListenerIDs, d.global("forwardingRules", name(j, strings.TrimPrefix(r.key, "rule ")+"-rule")))
		}
	}
	if slices.Contains(c.ListenerPorts, 443) {
		lb.CertificateID = strings.TrimPrefix(d.certificateOf(j, c), "https://www.googleapis.com/compute/v1/")
		lb.SelfSigned = c.CertificateARN == "" && c.Domain == ""
	}
	return lb, nil
}

// DeleteListeners implements vmpool.Driver: rules, proxies, certificate, URL map, in that
// order (each is in use by the one before).
func (d VMPoolDriver) DeleteListeners(ctx context.Context, j *job.Job) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	c, _ := vmpool.DecodeConfig(j.Config)
	// Every listener the job could have had: the config may have changed since.
	c.ListenerPorts, c.CertificateARN = []int32{80, 443}, ""
	rs := d.listeners(s, j, c, "")
	var order []keyed
	for _, pfx := range []string{"rule ", "proxy ", "certificate", "url map"} {
		for _, r := range rs {
			if strings.HasPrefix(r.key, pfx) {
				order = append(order, r)
			}
		}
	}
	return d.awaitAll(ctx, "deleting the listeners of "+j.ID, true, order...)
}

// UpsertDNS implements vmpool.Driver: an A record of the domain to the load balancer's
// address, in the Cloud DNS zone the config names.
func (d VMPoolDriver) UpsertDNS(ctx context.Context, zoneID, domain string, lb vmpool.LoadBalancer) error {
	return DNSZoneDriver(d).UpsertRecord(ctx, zoneID, dnszone.Record{Name: domain, Type: "A", TTL: 300, Values: []string{lb.DNSName}})
}

// DeleteDNS implements vmpool.Driver.
func (d VMPoolDriver) DeleteDNS(ctx context.Context, zoneID, domain string, lb vmpool.LoadBalancer) error {
	return DNSZoneDriver(d).DeleteRecord(ctx, zoneID, dnszone.Record{Name: domain, Type: "A", Values: []string{lb.DNSName}})
}
