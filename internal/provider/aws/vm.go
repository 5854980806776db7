package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider/aws/cloudinit"
)

// Pool modes.
const (
	ModeFixed = "fixed"
	ModeASG   = "asg"
)

// VM lifecycle states kept per VM in infra.
const (
	VMPending   = "pending"
	VMBootstrap = "bootstrap" // running, sentinel not seen yet
	VMReady     = "ready"
	VMStopped   = "stopped"
	VMGone      = "terminated"
)

// VMPoolSpec is the reference's VM request plus where to put it.
type VMPoolSpec struct {
	Tags               Tags
	Name               string
	InstanceType       string
	ImageID            string // empty: the newest Amazon Linux 2023 image of the region
	Mode               string // fixed | asg
	Min, Max, Desired  int32
	Bare               bool
	VPCID              string
	VPCCIDR            string
	SubnetIDs          []string // private subnets
	InstanceProfileARN string
	// TargetCPU is an ASG pool's target-tracking policy on average CPU (percent); 0: none.
	TargetCPU float64
}

// LaunchTemplate is the pool's template.
type LaunchTemplate struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version int64  `json:"version"`
}

// VM is one instance as infra keeps it.
type VM struct {
	ID        string `json:"id"`
	PrivateIP string `json:"privateIP,omitempty"`
	SubnetID  string `json:"subnetID,omitempty"`
	State     string `json:"state"`
}

// BootstrapProbe tells whether a VM's cloud-init wrote the sentinel. On AWS it runs a command
// over SSM; moto has no SSM sessions or command output, so tests use FakeBootstrapProbe.
type BootstrapProbe interface {
	SentinelPresent(ctx context.Context, instanceID string) (bool, error)
}

// FakeBootstrapProbe answers "present" for every instance in Ready (all when AllReady). It stands
// in for SSM, which moto does not implement.
type FakeBootstrapProbe struct {
	AllReady bool
	Ready    map[string]bool
}

// SentinelPresent implements BootstrapProbe.
func (f FakeBootstrapProbe) SentinelPresent(_ context.Context, id string) (bool, error) {
	return f.AllReady || f.Ready[id], nil
}

// poolName is the deterministic name of the pool's launch template and ASG.
func poolName(t Tags) string { return DatastoreID(t) }

// EnsureVMSecurityGroup creates the VMs' group: inbound only from the VPC's CIDR and from the
// LB's group (when given); no SSH from anywhere else, egress open (through NAT). An existing
// group is converged: ingress added behind Groundwork's back is revoked (reconcile).
func (p *Provider) EnsureVMSecurityGroup(ctx context.Context, t Tags, vpcID, vpcCIDR, lbGroupID string) (string, error) {
	t = t.WithRole("vm-sg")
	id, err := p.ensureSecurityGroup(ctx, t, vpcID, "Groundwork VMs of "+t.JobID)
	if err != nil {
		return "", err
	}
	return id, p.convergeIngress(ctx, id, vmGroupPerms(vpcCIDR, lbGroupID))
}

// EnsureLBSecurityGroup creates the load balancer's group, open on the listener ports only;
// an existing group is converged like the VMs' group.
func (p *Provider) EnsureLBSecurityGroup(ctx context.Context, t Tags, vpcID string, ports []int32) (string, error) {
	t = t.WithRole("lb-sg")
	id, err := p.ensureSecurityGroup(ctx, t, vpcID, "Groundwork load balancer of "+t.JobID)
	if err != nil {
		return "", err
	}
	return id, p.convergeIngress(ctx, id, lbGroupPerms(ports))
}

func (p *Provider) ensureSecurityGroup(ctx context.Context, t Tags, vpcID, desc string) (string, error) {
	find := func(ctx context.Context) (string, bool, error) {
		out, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: t.ec2Filters()})
		if err != nil || len(out.SecurityGroups) == 0 {
			return "", false, err
		}
		return deref(out.SecurityGroups[0].GroupId), true, nil
	}
	id, found, err := find(ctx)
	if err != nil || found {
		return id, p.classify(err, false)
	}
	name := "gw-" + t.JobID + "-" + t.Role
	// No idempotency key, but the name is unique in the VPC: a repeat after a lost answer meets
	// InvalidGroup.Duplicate, and the look-up by tag adopts the group.
	id, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (string, error) {
		out, err := p.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName: &name, Description: &desc, VpcId: &vpcID, TagSpecifications: t.ec2Spec(ec2types.ResourceTypeSecurityGroup),
		}, ec2NoRetry)
		if err != nil {
			return "", err
		}
		return deref(out.GroupId), nil
	})
	if isCode(err, "InvalidGroup.Duplicate") {
		// The name is taken by a group without this job's tags.
		return "", alreadyExists("security group", name)
	}
	return id, p.classify(err, false)
}

func (p *Provider) authorize(ctx context.Context, groupID string, perms []ec2types.IpPermission) error {
	for _, perm := range perms {
		_, err := p.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: &groupID, IpPermissions: []ec2types.IpPermission{perm}})
		if err != nil && !isCode(err, "InvalidPermission.Duplicate") {
			return p.classify(err, true)
		}
	}
	return nil
}

// DeleteSecurityGroups removes the job's groups with role in roles.
func (p *Provider) DeleteSecurityGroups(ctx context.Context, t Tags, roles ...string) error {
	for _, role := range roles {
		out, err := p.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: t.WithRole(role).ec2Filters()})
		if err != nil {
			return p.classify(err, false)
		}
		for _, g := range out.SecurityGroups {
			if _, err := p.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: g.GroupId}); err != nil && !gone(err) {
				// DependencyViolation while an ENI lingers: transient by classification.
				return p.classify(err, false)
			}
		}
	}
	return nil
}

// DefaultImage finds the newest Amazon Linux 2023 x86_64 image (SSM agent preinstalled).
func (p *Provider) DefaultImage(ctx context.Context) (string, error) {
	out, err := p.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{{Name: ptr("architecture"), Values: []string{"x86_64"}}, {Name: ptr("state"), Values: []string{"available"}}}})
	if err != nil {
		return "", p.classify(err, false)
	}
	imgs := out.Images
	sort.Slice(imgs, func(i, j int) bool {
		ai, aj := strings.Contains(deref(imgs[i].Name), "al2023"), strings.Contains(deref(imgs[j].Name), "al2023")
		if ai != aj {
			return ai
		}
		return deref(imgs[i].CreationDate) > deref(imgs[j].CreationDate)
	})
	if len(imgs) == 0 {
		return "", fault.UserAction(fmt.Errorf("no Amazon Linux image in %s", p.region), "NoImage", "Give the pool an imageID.", "")
	}
	return deref(imgs[0].ImageId), nil
}

// EnsureLaunchTemplate creates the pool's template with the cloud-init user data; when the user
// data, image or instance type changed it adds a version and makes it the default (existing VMs
// keep theirs until a roll replaces them: see RollStep).
func (p *Provider) EnsureLaunchTemplate(ctx context.Context, s VMPoolSpec, vmGroupID string) (LaunchTemplate, error) {
	userData, err := cloudinit.Render(cloudinit.Options{Bare: s.Bare, JobID: s.Tags.JobID})
	if err != nil {
		return LaunchTemplate{}, fault.System(err)
	}
	image := s.ImageID
	if image == "" {
		if image, err = p.DefaultImage(ctx); err != nil {
			return LaunchTemplate{}, err
		}
	}
	t := s.Tags.WithRole("launch-template")
	data := &ec2types.RequestLaunchTemplateData{
		ImageId: &image, InstanceType: ec2types.InstanceType(s.InstanceType),
		UserData:           ptr(base64.StdEncoding.EncodeToString([]byte(userData))),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: nilIfEmpty(s.InstanceProfileARN)},
		// No public IP and no key pair: SSM is the only way in.
		NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
			DeviceIndex: ptr(int32(0)), AssociatePublicIpAddress: ptr(false), Groups: []string{vmGroupID},
		}},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: s.Tags.WithRole("vm").ec2()},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: s.Tags.WithRole("vm-volume").ec2()},
		},
	}
	name := poolName(s.Tags)
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: t.ec2Filters()})
	if err != nil {
		return LaunchTemplate{}, p.classify(err, false)
	}
	if len(out.LaunchTemplates) == 0 {
		find := func(ctx context.Context) (LaunchTemplate, bool, error) {
			out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
			if isCode(err, "InvalidLaunchTemplateName.NotFoundException") {
				return LaunchTemplate{}, false, nil
			}
			if err != nil || len(out.LaunchTemplates) == 0 {
				return LaunchTemplate{}, false, err
			}
			lt := out.LaunchTemplates[0]
			if !t.Owns(ec2TagMap(lt.Tags)) {
				return LaunchTemplate{}, false, alreadyExists("launch template", name)
			}
			return LaunchTemplate{ID: deref(lt.LaunchTemplateId), Name: name, Version: deref(lt.LatestVersionNumber)}, true, nil
		}
		// The name is unique in the region and EC2 honours the key: a repeat after a lost
		// answer is the same template, or a name conflict the look-up settles.
		lt, err := createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (LaunchTemplate, error) {
			created, err := p.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
				LaunchTemplateName: &name, LaunchTemplateData: data, ClientToken: ptr(clientToken(stepLaunchTemplate, t)),
				TagSpecifications: t.ec2Spec(ec2types.ResourceTypeLaunchTemplate),
			}, ec2NoRetry)
			if err != nil {
				return LaunchTemplate{}, err
			}
			return LaunchTemplate{ID: deref(created.LaunchTemplate.LaunchTemplateId), Name: name, Version: deref(created.LaunchTemplate.LatestVersionNumber)}, nil
		})
		return lt, p.classify(err, false)
	}
	lt := out.LaunchTemplates[0]
	cur := LaunchTemplate{ID: deref(lt.LaunchTemplateId), Name: deref(lt.LaunchTemplateName), Version: deref(lt.DefaultVersionNumber)}
	same := func(version int64) (bool, error) {
		vers, err := p.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{fmt.Sprint(version)}})
		if err != nil {
			return false, p.classify(err, true)
		}
		if len(vers.LaunchTemplateVersions) == 0 {
			return false, nil
		}
		d := vers.LaunchTemplateVersions[0].LaunchTemplateData
		return d != nil && deref(d.UserData) == deref(data.UserData) && string(d.InstanceType) == s.InstanceType && deref(d.ImageId) == image, nil
	}
	if ok, err := same(cur.Version); err != nil || ok {
		return cur, err
	}
	// A version made by an earlier attempt that stopped before it became the default (a crash
	// between the two calls) is that version: where the cloud does not honour the key (moto),
	// creating again would add a second one.
	latest := deref(lt.LatestVersionNumber)
	if ok, err := same(latest); err != nil {
		return cur, err
	} else if ok && latest != cur.Version {
		cur.Version = latest
	} else {
		// The key is the version's content: a repeat of the same change is the same version.
		nv, err := p.ec2.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: lt.LaunchTemplateId, LaunchTemplateData: data,
			ClientToken: ptr(clientToken(stepLaunchTemplate, t.WithRole(t.Role+"-"+contentKey(image, s.InstanceType, deref(data.UserData)))))})
		if err != nil {
			return cur, p.classify(err, false)
		}
		cur.Version = deref(nv.LaunchTemplateVersion.VersionNumber)
	}
	if _, err := p.ec2.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId, DefaultVersion: ptr(fmt.Sprint(cur.Version))}); err != nil {
		return cur, p.classify(err, true)
	}
	return cur, nil
}

// DeleteLaunchTemplate removes the job's template.
func (p *Provider) DeleteLaunchTemplate(ctx context.Context, t Tags) error {
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: t.WithRole("launch-template").ec2Filters()})
	if err != nil {
		return p.classify(err, false)
	}
	for _, lt := range out.LaunchTemplates {
		if _, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	return nil
}

// Steps of the vm_pool family, for idempotency keys.
const (
	stepLaunchTemplate = "create_launch_template"
	stepVMs            = "create_vms"
)

// contentKey is a short digest of a launch template version's content.
func contentKey(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:6])
}

// EnsureVMs starts the pool's instances: in fixed mode one RunInstances per slot with a
// ClientToken of job and slot (each VM has a stable identity), found by its slot tag on a
// re-run; in ASG mode an Auto Scaling group, whose sizes are patched in place when they change.
func (p *Provider) EnsureVMs(ctx context.Context, s VMPoolSpec, lt LaunchTemplate) ([]VM, error) {
	if s.Mode == ModeASG {
		if err := p.ensureASG(ctx, s, lt); err != nil {
			return nil, err
		}
		if err := p.EnsureScalingPolicy(ctx, s.Tags, s.TargetCPU); err != nil {
			return nil, err
		}
		return p.ListVMs(ctx, s.Tags)
	}
	n := s.Desired
	if n == 0 {
		n = s.Min
	}
	for i := int32(0); i < n; i++ {
		slot := s.Tags.WithRole(fmt.Sprintf("vm-%d", i))
		find := func(ctx context.Context) (struct{}, bool, error) {
			out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
				{Name: ptr("tag:" + TagJobID), Values: []string{s.Tags.JobID}}, {Name: ptr("tag:groundwork:slot"), Values: []string{slot.Role}},
				{Name: ptr("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
			return struct{}{}, err == nil && len(out.Reservations) > 0, err
		}
		_, found, err := find(ctx)
		if err != nil {
			return nil, p.classify(err, false)
		}
		if found {
			continue
		}
		tags := append(s.Tags.WithRole("vm").ec2(), ec2types.Tag{Key: ptr("groundwork:slot"), Value: &slot.Role},
			ec2types.Tag{Key: ptr("Name"), Value: ptr(fmt.Sprintf("%s-%d", s.Name, i))})
		// One key per slot (EC2 returns the slot's instance to a repeat), and the look-up by the
		// slot tag where the key is not honoured.
		_, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (struct{}, error) {
			_, err := p.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
				MinCount: ptr(int32(1)), MaxCount: ptr(int32(1)), ClientToken: ptr(clientToken(stepVMs, slot)),
				LaunchTemplate:    &ec2types.LaunchTemplateSpecification{LaunchTemplateId: &lt.ID, Version: ptr(fmt.Sprint(lt.Version))},
				SubnetId:          &s.SubnetIDs[int(i)%len(s.SubnetIDs)],
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
			}, ec2NoRetry)
			return struct{}{}, err
		})
		if err != nil {
			return nil, p.classify(err, false)
		}
	}
	return p.ListVMs(ctx, s.Tags)
}

func (t Tags) asg(name string) []asgtypes.Tag {
	m := t.Map()
	out := make([]asgtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, asgtypes.Tag{Key: ptr(k), Value: ptr(m[k]), PropagateAtLaunch: ptr(true), ResourceId: &name, ResourceType: ptr("auto-scaling-group")})
	}
	return out
}

func (p *Provider) ensureASG(ctx context.Context, s VMPoolSpec, lt LaunchTemplate) error {
	name := poolName(s.Tags)
	desired := s.Desired
	if desired == 0 {
		desired = s.Min
	}
	g, found, err := p.describeASG(ctx, name)
	if err != nil {
		return err
	}
	if found {
		if !s.Tags.Owns(asgTagMap(g.Tags)) {
			return alreadyExists("Auto Scaling group", name)
		}
		return p.ResizeASG(ctx, s.Tags, s.Min, s.Max, desired)
	}
	// The name is the key. The look-up by name runs before any repeat: an emulator (moto)
	// answers a second create by replacing the group and launching its instances again.
	find := func(ctx context.Context) (struct{}, bool, error) {
		g, found, err := p.describeASG(ctx, name)
		if err != nil || !found {
			return struct{}{}, false, err
		}
		if !s.Tags.Owns(asgTagMap(g.Tags)) {
			return struct{}{}, false, alreadyExists("Auto Scaling group", name)
		}
		return struct{}{}, true, nil
	}
	_, err = createOnce(ctx, p.asg.Options().Retryer, find, func(ctx context.Context) (struct{}, error) {
		_, err := p.asg.CreateAutoScalingGroup(ctx, &autoscaling.CreateAutoScalingGroupInput{
			AutoScalingGroupName: &name, MinSize: &s.Min, MaxSize: &s.Max, DesiredCapacity: &desired,
			LaunchTemplate:    &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: &lt.ID, Version: ptr("$Default")},
			VPCZoneIdentifier: ptr(strings.Join(s.SubnetIDs, ",")), Tags: s.Tags.WithRole("vm").asg(name),
			HealthCheckType: ptr("EC2"),
		}, asgNoRetry)
		return struct{}{}, err
	})
	return p.classify(err, false)
}

func asgTagMap(tags []asgtypes.TagDescription) map[string]string {
	m := map[string]string{}
	for _, tg := range tags {
		m[deref(tg.Key)] = deref(tg.Value)
	}
	return m
}

func (p *Provider) describeASG(ctx context.Context, name string) (asgtypes.AutoScalingGroup, bool, error) {
	out, err := p.asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		return asgtypes.AutoScalingGroup{}, false, p.classify(err, false)
	}
	if len(out.AutoScalingGroups) == 0 {
		return asgtypes.AutoScalingGroup{}, false, nil
	}
	return out.AutoScalingGroups[0], true, nil
}

// ResizeASG patches min/max/desired in place: existing instances stay.
func (p *Provider) ResizeASG(ctx context.Context, t Tags, min, max, desired int32) error {
	if min > max || desired < min || desired > max {
		return fault.UserAction(fmt.Errorf("sizes min=%d max=%d desired=%d", min, max, desired), "InvalidSize", "Keep min <= desired <= max.", "")
	}
	_, err := p.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: ptr(poolName(t)), MinSize: &min, MaxSize: &max, DesiredCapacity: &desired,
	})
	if err != nil {
		return p.classify(err, true)
	}
	return nil
}

// ASGName is the pool's Auto Scaling group name.
func ASGName(t Tags) string { return poolName(t) }

// ListVMs returns the job's live instances (fixed or ASG), sorted by ID.
func (p *Provider) ListVMs(ctx context.Context, t Tags) ([]VM, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: ptr("tag:" + TagJobID), Values: []string{t.JobID}}, {Name: ptr("tag:" + TagRole), Values: []string{"vm"}},
		{Name: ptr("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
	if err != nil {
		return nil, p.classify(err, false)
	}
	var vms []VM
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			st := VMPending
			switch in.State.Name {
			case ec2types.InstanceStateNameRunning:
				st = VMBootstrap
			case ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped:
				st = VMStopped
			}
			vms = append(vms, VM{ID: deref(in.InstanceId), PrivateIP: deref(in.PrivateIpAddress), SubnetID: deref(in.SubnetId), State: st})
		}
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].ID < vms[j].ID })
	return vms, nil
}

// CheckBootstrap moves running VMs to ready once probe sees their sentinel.
func CheckBootstrap(ctx context.Context, probe BootstrapProbe, vms []VM) ([]VM, bool, error) {
	all := true
	out := append([]VM(nil), vms...)
	for i := range out {
		if out[i].State != VMBootstrap {
			all = all && out[i].State == VMReady
			continue
		}
		ok, err := probe.SentinelPresent(ctx, out[i].ID)
		if err != nil {
			return out, false, err
		}
		if ok {
			out[i].State = VMReady
		} else {
			all = false
		}
	}
	return out, all && len(out) > 0, nil
}

// ConsoleOutput is an instance's console output as EC2 last captured it (GetConsoleOutput;
// the capture lags the console and is empty until the first one), decoded from base64.
func (p *Provider) ConsoleOutput(ctx context.Context, instanceID string) (string, error) {
	out, err := p.ec2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: &instanceID})
	if err != nil {
		return "", p.classify(err, false)
	}
	raw, err := base64.StdEncoding.DecodeString(deref(out.Output))
	if err != nil {
		return "", fault.System(fmt.Errorf("console output of %s: %w", instanceID, err))
	}
	return string(raw), nil
}

// DeleteVMs terminates the pool: the ASG is scaled to zero and deleted (its instances go with
// it), fixed instances are terminated. done=false while instances are still shutting down.
func (p *Provider) DeleteVMs(ctx context.Context, t Tags) (done bool, err error) {
	name := poolName(t)
	if g, found, err := p.describeASG(ctx, name); err != nil {
		return false, err
	} else if found {
		if err := p.DeleteScalingPolicy(ctx, t); err != nil {
			return false, err
		}
		if deref(g.DesiredCapacity) != 0 || deref(g.MinSize) != 0 {
			zero := int32(0)
			if _, err := p.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: &name, MinSize: &zero, MaxSize: &zero, DesiredCapacity: &zero}); err != nil {
				return false, p.classify(err, false)
			}
		}
		if _, err := p.asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: &name, ForceDelete: ptr(true)}); err != nil && !gone(err) && !isCode(err, "ValidationError") {
			return false, p.classify(err, false)
		}
	}
	vms, err := p.ListVMs(ctx, t)
	if err != nil {
		return false, err
	}
	var ids []string
	for _, vm := range vms {
		ids = append(ids, vm.ID)
	}
	if len(ids) == 0 {
		return true, nil
	}
	if _, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil && !gone(err) {
		return false, p.classify(err, false)
	}
	return false, nil
}

// SDKRefresher starts an instance refresh through the Auto Scaling API (moto lacks it).
type SDKRefresher struct{ P *Provider }

// StartInstanceRefresh implements InstanceRefresher.
func (r SDKRefresher) StartInstanceRefresh(ctx context.Context, asgName string) (string, error) {
	out, err := r.P.asg.StartInstanceRefresh(ctx, &autoscaling.StartInstanceRefreshInput{AutoScalingGroupName: &asgName})
	if err != nil {
		return "", r.P.classify(err, false)
	}
	return deref(out.InstanceRefreshId), nil
}

// FakeRefresher records refresh requests; tests use it because moto has no instance refresh.
type FakeRefresher struct{ Started []string }

// StartInstanceRefresh implements InstanceRefresher.
func (f *FakeRefresher) StartInstanceRefresh(_ context.Context, asgName string) (string, error) {
	f.Started = append(f.Started, asgName)
	return fmt.Sprintf("refresh-%d", len(f.Started)), nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
