package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// Tags EC2 puts on every instance launched from a launch template: which template and which
// version. The roll reads the version from them, so which instances are old is always the
// cloud's answer, never a record of the roll's own.
const (
	tagLTVersion = "aws:ec2launchtemplate:version"
	tagSlot      = "groundwork:slot"
	// tagRollBase is set on the ASG while a roll is under way: the desired capacity before the
	// roll's surge, so that a resumed roll knows whether its surge instance is already asked for.
	tagRollBase = "groundwork:roll-base"
	// tagRollSuspended is set on the ASG with tagRollBase: the processes the roll suspended
	// (comma-separated), so that its end resumes those and no process someone else suspended.
	tagRollSuspended = "groundwork:roll-suspended"
)

// rollProcesses are the Auto Scaling processes a roll suspends while it runs: the scaling
// policy's alarms (a target-tracking policy would scale the surge back in, or scale out
// against a group being replaced), scheduled actions (the same from a schedule) and AZ
// rebalancing (which launches and ends instances of its own). Launch, Terminate and the
// health checks stay on: the roll needs them.
var rollProcesses = []string{"AlarmNotification", "AZRebalance", "ScheduledActions"}

const stepRoll = "roll_vms"

// RollSpec says which pool to roll and how its instances are judged healthy.
type RollSpec struct {
	Tags Tags
	Name string
	Mode string
	// Slots is a fixed pool's instance count (its desired size).
	Slots int32
	// Max is an ASG pool's configured max size, which the group gets back after the surge.
	Max int32
	// TargetGroupARN is the target group the pool is attached to; empty when it has none (or
	// it is detached), and a new instance is then ready once running and bootstrapped.
	TargetGroupARN string
	// Probe reads the bootstrap sentinel when there is no target group; nil: running is ready.
	Probe BootstrapProbe
}

// RollStatus is where a roll stands after one RollStep.
type RollStatus struct {
	Version  int64 // the launch template version the pool is rolled to
	Total    int   // instances (slots) to replace in all
	Replaced int   // of them already on Version
	Done     bool
	// Waiting says what the roll waits for when not Done.
	Waiting string
}

// rollVM is one live instance of the pool, as the roll sees it.
type rollVM struct {
	ID, Slot, SubnetID string
	Version            int64
	State              ec2types.InstanceStateName
}

// RollStep advances the replacement of the pool's instances by the launch template's default
// version by at most one cloud action and says where the roll stands. Every call reads the
// template, the instances (their version tags) and the target health afresh, so a call after a
// crash picks the roll up where the cloud is, launching nothing twice. Capacity never drops:
// one new instance is added and is healthy in the target group (or running and bootstrapped)
// before one old instance is taken out of the target group and terminated.
func (p *Provider) RollStep(ctx context.Context, s RollSpec) (RollStatus, error) {
	lt, found, err := p.jobLaunchTemplate(ctx, s.Tags)
	if err != nil {
		return RollStatus{}, err
	}
	if !found {
		return RollStatus{}, fault.UserAction(errors.New("the pool has no launch template"), "NoLaunchTemplate",
			"The pool's launch template is gone; recreate the pool.", "")
	}
	vms, err := p.rollVMs(ctx, s.Tags)
	if err != nil {
		return RollStatus{}, err
	}
	if s.Mode == ModeASG {
		return p.rollASG(ctx, s, lt, vms)
	}
	return p.rollFixed(ctx, s, lt, vms)
}

// jobLaunchTemplate finds the job's template with its default version.
func (p *Provider) jobLaunchTemplate(ctx context.Context, t Tags) (LaunchTemplate, bool, error) {
	out, err := p.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: t.WithRole("launch-template").ec2Filters()})
	if err != nil {
		return LaunchTemplate{}, false, p.classify(err, false)
	}
	if len(out.LaunchTemplates) == 0 {
		return LaunchTemplate{}, false, nil
	}
	lt := out.LaunchTemplates[0]
	return LaunchTemplate{ID: deref(lt.LaunchTemplateId), Name: deref(lt.LaunchTemplateName), Version: deref(lt.DefaultVersionNumber)}, true, nil
}

// rollVMs lists the pool's live instances with their slot and template version, by ID.
func (p *Provider) rollVMs(ctx context.Context, t Tags) ([]rollVM, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: ptr("tag:" + TagJobID), Values: []string{t.JobID}}, {Name: ptr("tag:" + TagRole), Values: []string{"vm"}},
		{Name: ptr("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
	if err != nil {
		return nil, p.classify(err, false)
	}
	var vms []rollVM
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			tags := ec2TagMap(in.Tags)
			// An instance without the tag was not launched from the template: it is old.
			v, _ := strconv.ParseInt(tags[tagLTVersion], 10, 64)
			vms = append(vms, rollVM{ID: deref(in.InstanceId), Slot: tags[tagSlot], SubnetID: deref(in.SubnetId), Version: v, State: in.State.Name})
		}
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].ID < vms[j].ID })
	return vms, nil
}

// targetHealth maps the target group's instances to their health state.
func (p *Provider) targetHealth(ctx context.Context, tgARN string) (map[string]elbtypes.TargetHealthStateEnum, error) {
	out, err := p.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &tgARN})
	if err != nil {
		return nil, p.classify(err, false)
	}
	m := map[string]elbtypes.TargetHealthStateEnum{}
	for _, d := range out.TargetHealthDescriptions {
		if d.Target != nil && d.TargetHealth != nil {
			m[deref(d.Target.Id)] = d.TargetHealth.State
		}
	}
	return m, nil
}

// ready reports whether a new instance may carry traffic: healthy in the target group, or
// without one running and bootstrapped; why says what it waits for otherwise.
func (p *Provider) ready(ctx context.Context, s RollSpec, vm rollVM, health map[string]elbtypes.TargetHealthStateEnum) (ok bool, why string, err error) {
	if vm.State != ec2types.InstanceStateNameRunning {
		return false, "waiting for " + vm.ID + " to run", nil
	}
	if s.TargetGroupARN != "" {
		if health[vm.ID] != elbtypes.TargetHealthStateEnumHealthy {
			return false, "waiting for " + vm.ID + " to be healthy in the target group", nil
		}
		return true, "", nil
	}
	if s.Probe == nil {
		return true, "", nil
	}
	present, err := s.Probe.SentinelPresent(ctx, vm.ID)
	if err != nil || !present {
		return false, "waiting for the bootstrap sentinel on " + vm.ID, err
	}
	return true, "", nil
}

// rollFixed replaces a fixed pool slot by slot: a new instance for the slot (its own
// ClientToken of job, slot and version), registered and healthy, then the slot's old
// instance deregistered, drained and terminated.
func (p *Provider) rollFixed(ctx context.Context, s RollSpec, lt LaunchTemplate, vms []rollVM) (RollStatus, error) {
	st := RollStatus{Version: lt.Version, Total: int(s.Slots)}
	bySlot := map[string][]rollVM{}
	for _, vm := range vms {
		bySlot[vm.Slot] = append(bySlot[vm.Slot], vm)
	}
	pending := -1
	for i := 0; i < int(s.Slots); i++ {
		old := false
		for _, vm := range bySlot[fmt.Sprintf("vm-%d", i)] {
			old = old || vm.Version != lt.Version
		}
		if !old {
			st.Replaced++
		} else if pending < 0 {
			pending = i
		}
	}
	if pending < 0 {
		st.Done = true
		return st, nil
	}
	slot := fmt.Sprintf("vm-%d", pending)
	var olds, news []rollVM
	for _, vm := range bySlot[slot] {
		if vm.Version == lt.Version {
			news = append(news, vm)
		} else {
			olds = append(olds, vm)
		}
	}
	if len(news) == 0 {
		if err := p.launchForSlot(ctx, s, lt, pending, olds[0].SubnetID); err != nil {
			return st, err
		}
		st.Waiting = "launched a version " + strconv.FormatInt(lt.Version, 10) + " instance for " + slot
		return st, nil
	}
	var health map[string]elbtypes.TargetHealthStateEnum
	if s.TargetGroupARN != "" {
		var err error
		if health, err = p.targetHealth(ctx, s.TargetGroupARN); err != nil {
			return st, err
		}
		if _, registered := health[news[0].ID]; !registered && news[0].State == ec2types.InstanceStateNameRunning {
			if _, err := p.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &s.TargetGroupARN,
				Targets: []elbtypes.TargetDescription{{Id: &news[0].ID, Port: ptr(int32(80))}}}); err != nil {
				return st, p.classify(err, true)
			}
			st.Waiting = "registered " + news[0].ID + " in the target group"
			return st, nil
		}
	}
	ok, why, err := p.ready(ctx, s, news[0], health)
	if err != nil || !ok {
		st.Waiting = why
		return st, err
	}
	o := olds[0]
	if st.Waiting, err = p.drain(ctx, s, o, health); err != nil || st.Waiting != "" {
		return st, err
	}
	if _, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{o.ID}}); err != nil && !gone(err) {
		return st, p.classify(err, true)
	}
	if len(olds) == 1 {
		st.Replaced++
	}
	st.Waiting = "terminated " + o.ID
	return st, nil
}

// drain takes an old instance out of the target group and says what the roll waits for while
// it is still registered or draining; "" once it is out (or there is no target group).
func (p *Provider) drain(ctx context.Context, s RollSpec, o rollVM, health map[string]elbtypes.TargetHealthStateEnum) (string, error) {
	state, registered := health[o.ID]
	if s.TargetGroupARN == "" || !registered {
		return "", nil
	}
	if state == elbtypes.TargetHealthStateEnumDraining {
		return "waiting for " + o.ID + " to drain", nil
	}
	_, err := p.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: &s.TargetGroupARN,
		Targets: []elbtypes.TargetDescription{{Id: &o.ID, Port: ptr(int32(80))}}})
	if err != nil && !isCode(err, "InvalidTarget") {
		return "", p.classify(err, true)
	}
	return "deregistered " + o.ID + " from the target group", nil
}

// launchForSlot starts the slot's instance on lt's version. The key is job, slot and version:
// EC2 answers a repeat with the same instance, and the look-up by slot and version tag adopts
// it where the key is not honoured.
func (p *Provider) launchForSlot(ctx context.Context, s RollSpec, lt LaunchTemplate, i int, subnet string) error {
	slot := s.Tags.WithRole(fmt.Sprintf("vm-%d", i))
	version := strconv.FormatInt(lt.Version, 10)
	find := func(ctx context.Context) (struct{}, bool, error) {
		out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: ptr("tag:" + TagJobID), Values: []string{s.Tags.JobID}}, {Name: ptr("tag:" + tagSlot), Values: []string{slot.Role}},
			{Name: ptr("tag:" + tagLTVersion), Values: []string{version}},
			{Name: ptr("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}}}})
		return struct{}{}, err == nil && len(out.Reservations) > 0, err
	}
	tags := append(s.Tags.WithRole("vm").ec2(), ec2types.Tag{Key: ptr(tagSlot), Value: &slot.Role},
		ec2types.Tag{Key: ptr("Name"), Value: ptr(fmt.Sprintf("%s-%d", s.Name, i))})
	in := &ec2.RunInstancesInput{
		MinCount: ptr(int32(1)), MaxCount: ptr(int32(1)), ClientToken: ptr(clientToken(stepRoll, slot.WithRole(slot.Role+"-v"+version))),
		LaunchTemplate:    &ec2types.LaunchTemplateSpecification{LaunchTemplateId: &lt.ID, Version: &version},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	}
	if subnet != "" {
		in.SubnetId = &subnet
	}
	_, err := createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (struct{}, error) {
		_, err := p.ec2.RunInstances(ctx, in, ec2NoRetry)
		return struct{}{}, err
	})
	return p.classify(err, false)
}

// rollASG replaces an ASG pool's instances through the group: desired (and max if need be)
// one above the roll's base brings up a new instance, which the group launches on the
// template's default version and registers in its target groups; once it is healthy one old
// instance is deregistered, drained, and terminated with the desired capacity decremented,
// back to the base. The base
// is kept on the group as a tag for the roll's duration, so a resumed roll tells an asked-for
// surge from none.
func (p *Provider) rollASG(ctx context.Context, s RollSpec, lt LaunchTemplate, vms []rollVM) (RollStatus, error) {
	name := poolName(s.Tags)
	g, found, err := p.describeASG(ctx, name)
	if err != nil {
		return RollStatus{}, err
	}
	if !found {
		return RollStatus{}, fault.UserAction(errors.New("the pool has no Auto Scaling group"), "NoASG", "The pool's Auto Scaling group is gone; recreate the pool.", "")
	}
	if v := deref(g.LaunchTemplate).Version; g.LaunchTemplate != nil && deref(v) != "$Default" && deref(v) != strconv.FormatInt(lt.Version, 10) {
		// A group pinned to a version is pointed at the new one; $Default follows by itself.
		if _, err := p.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: &name,
			LaunchTemplate: &asgtypes.LaunchTemplateSpecification{LaunchTemplateId: &lt.ID, Version: ptr(strconv.FormatInt(lt.Version, 10))}}); err != nil {
			return RollStatus{}, p.classify(err, true)
		}
	}
	version := map[string]rollVM{}
	for _, vm := range vms {
		version[vm.ID] = vm
	}
	var olds, news []rollVM
	terminating := 0
	for _, in := range g.Instances {
		vm, live := version[deref(in.InstanceId)]
		if !live || strings.HasPrefix(string(in.LifecycleState), "Terminating") || strings.HasPrefix(string(in.LifecycleState), "Detach") {
			terminating++
			continue
		}
		if vm.Version == lt.Version {
			news = append(news, vm)
		} else {
			olds = append(olds, vm)
		}
	}
	desired, maxSize := deref(g.DesiredCapacity), deref(g.MaxSize)
	base, rolling := int32(0), false
	var mine []string // the processes the roll suspended
	hasMine := false
	for _, tg := range g.Tags {
		switch deref(tg.Key) {
		case tagRollBase:
			if n, err := strconv.ParseInt(deref(tg.Value), 10, 32); err == nil {
				base, rolling = int32(n), true
			}
		case tagRollSuspended:
			hasMine = true
			if v := deref(tg.Value); v != "" {
				mine = strings.Split(v, ",")
			}
		}
	}
	if !rolling {
		base = desired
	}
	st := RollStatus{Version: lt.Version, Total: int(base), Replaced: int(base) - len(olds)}
	if st.Replaced < 0 {
		st.Replaced = 0
	}
	if len(olds) == 0 {
		if terminating > 0 {
			st.Waiting = "waiting for the last old instance to terminate"
			return st, nil
		}
		if rolling {
			// The surge's extra room goes; the base tag goes last, when the roll is over.
			if want := max(s.Max, base); maxSize > want {
				if _, err := p.asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: &name, MaxSize: ptr(want)}); err != nil {
					return st, p.classify(err, true)
				}
			}
			// The processes the roll suspended resume before its tags go: a call after a crash
			// in between finds the tags and resumes them again, which changes nothing.
			if len(mine) > 0 {
				if _, err := p.asg.ResumeProcesses(ctx, &autoscaling.ResumeProcessesInput{AutoScalingGroupName: &name, ScalingProcesses: mine}); err != nil {
					return st, p.classify(err, true)
				}
			}
			del := []asgtypes.Tag{{Key: ptr(tagRollBase), ResourceId: &name, ResourceType: ptr("auto-scaling-group")}}
			if hasMine {
				del = append(del, asgtypes.Tag{Key: ptr(tagRollSuspended), ResourceId: &name, ResourceType: ptr("auto-scaling-group")})
			}
			if _, err := p.asg.DeleteTags(ctx, &autoscaling.DeleteTagsInput{Tags: del}); err != nil {
				return st, p.classify(err, true)
			}
		}
		st.Replaced, st.Done = st.Total, true
		return st, nil
	}
	suspended := map[string]bool{}
	for _, sp := range g.SuspendedProcesses {
		suspended[deref(sp.ProcessName)] = true
	}
	if !rolling {
		// The processes to suspend are those not suspended already: one someone else
		// suspended stays theirs, and suspended, when the roll ends.
		mine = nil
		for _, proc := range rollProcesses {
			if !suspended[proc] {
				mine = append(mine, proc)
			}
		}
		// The tags go first, so that a roll cut short after suspending is resumed by its end.
		if _, err := p.asg.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: []asgtypes.Tag{
			{Key: ptr(tagRollBase), Value: ptr(strconv.Itoa(int(base))), PropagateAtLaunch: ptr(false), ResourceId: &name, ResourceType: ptr("auto-scaling-group")},
			{Key: ptr(tagRollSuspended), Value: ptr(strings.Join(mine, ",")), PropagateAtLaunch: ptr(false), ResourceId: &name, ResourceType: ptr("auto-scaling-group")},
		}}); err != nil {
			return st, p.classify(err, true)
		}
	}
	// Every call checks the group's suspended processes afresh: a call after a crash between
	// the tags and the suspension (or someone resuming one mid-roll) suspends them again.
	var missing []string
	for _, proc := range mine {
		if !suspended[proc] {
			missing = append(missing, proc)
		}
	}
	if len(missing) > 0 {
		if _, err := p.asg.SuspendProcesses(ctx, &autoscaling.SuspendProcessesInput{AutoScalingGroupName: &name, ScalingProcesses: missing}); err != nil {
			return st, p.classify(err, true)
		}
	}
	if desired <= base {
		if terminating > 0 {
			st.Waiting = "waiting for the replaced instance to terminate"
			return st, nil
		}
		in := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: &name, DesiredCapacity: ptr(base + 1)}
		if maxSize < base+1 {
			in.MaxSize = ptr(base + 1)
		}
		if _, err := p.asg.UpdateAutoScalingGroup(ctx, in); err != nil {
			return st, p.classify(err, true)
		}
		st.Waiting = "asked the group for one more instance"
		return st, nil
	}
	if len(olds)+len(news) < int(desired) {
		st.Waiting = "waiting for the group to launch the new instance"
		return st, nil
	}
	var health map[string]elbtypes.TargetHealthStateEnum
	if s.TargetGroupARN != "" {
		if health, err = p.targetHealth(ctx, s.TargetGroupARN); err != nil {
			return st, err
		}
	}
	for _, vm := range news {
		ok, why, err := p.ready(ctx, s, vm, health)
		if err != nil || !ok {
			st.Waiting = why
			return st, err
		}
	}
	// Out of the target group first, drained, then ended by the group: AWS would deregister it
	// on termination too, but an emulator (moto) leaves it registered and healthy.
	o := olds[0]
	if st.Waiting, err = p.drain(ctx, s, o, health); err != nil || st.Waiting != "" {
		return st, err
	}
	_, err = p.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &o.ID, ShouldDecrementDesiredCapacity: ptr(true)})
	if err != nil && !gone(err) && !isCode(err, "ValidationError") {
		return st, p.classify(err, true)
	}
	st.Replaced++
	st.Waiting = "terminated " + o.ID
	return st, nil
}
