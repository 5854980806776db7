package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/acm"
	acmtypes "github.com/aws/aws-sdk-go-v2/service/acm/types"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/provider/selfsigned"
)

// LBSpec asks for an internet-facing ALB in front of a VM pool.
type LBSpec struct {
	Tags            Tags
	VPCID           string
	PublicSubnetIDs []string
	SecurityGroupID string
	ListenerPorts   []int32 // default [80, 443]
	HealthPath      string  // default /healthz
	HealthPort      int32   // default 80
	// CertificateARN is used for 443; empty means import a self-signed certificate for Domain
	// (or the LB's DNS name) and say so.
	CertificateARN string
	Domain         string
}

// LoadBalancer is what the LB steps record.
type LoadBalancer struct {
	ARN            string   `json:"arn"`
	DNSName        string   `json:"dnsName"`
	ZoneID         string   `json:"canonicalZoneID"`
	State          string   `json:"state"`
	Ready          bool     `json:"ready"`
	TargetGroupARN string   `json:"targetGroupARN,omitempty"`
	ListenerARNs   []string `json:"listenerARNs,omitempty"`
	CertificateARN string   `json:"certificateARN,omitempty"`
	SelfSigned     bool     `json:"selfSignedCertificate,omitempty"`
}

// lbName fits ELB's 32-character limit.
func lbName(t Tags, prefix string) string {
	id := DatastoreID(t)
	n := prefix + id[3:]
	if len(n) > 32 {
		n = n[len(n)-32:]
	}
	for len(n) > 0 && (n[0] == '-' || n[len(n)-1] == '-') {
		if n[0] == '-' {
			n = n[1:]
		} else {
			n = n[:len(n)-1]
		}
	}
	return n
}

func (t Tags) elb() []elbtypes.Tag {
	m := t.Map()
	out := make([]elbtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, elbtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

// EnsureLoadBalancer creates the ALB (or finds this job's) and reports whether it is active.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, s LBSpec) (LoadBalancer, error) {
	name := lbName(s.Tags, "gw-")
	out, err := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
	if err != nil && !isCode(err, "LoadBalancerNotFound") {
		return LoadBalancer{}, p.classify(err, false)
	}
	var lb elbtypes.LoadBalancer
	if err == nil && len(out.LoadBalancers) > 0 {
		lb = out.LoadBalancers[0]
		if owned, err := p.elbOwned(ctx, s.Tags, deref(lb.LoadBalancerArn)); err != nil {
			return LoadBalancer{}, err
		} else if !owned {
			return LoadBalancer{}, alreadyExists("load balancer", name)
		}
	} else {
		// The name is ELB's key (a repeat with the same settings answers the same load
		// balancer); the look-up by name before any repeat covers emulators that make a second.
		find := func(ctx context.Context) (elbtypes.LoadBalancer, bool, error) {
			out, err := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{name}})
			if isCode(err, "LoadBalancerNotFound") {
				return elbtypes.LoadBalancer{}, false, nil
			}
			if err != nil || len(out.LoadBalancers) == 0 {
				return elbtypes.LoadBalancer{}, false, err
			}
			if owned, err := p.elbOwned(ctx, s.Tags, deref(out.LoadBalancers[0].LoadBalancerArn)); err != nil || !owned {
				return elbtypes.LoadBalancer{}, false, firstErr(err, alreadyExists("load balancer", name))
			}
			return out.LoadBalancers[0], true, nil
		}
		lb, err = createOnce(ctx, p.elb.Options().Retryer, find, func(ctx context.Context) (elbtypes.LoadBalancer, error) {
			created, err := p.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{
				Name: &name, Type: elbtypes.LoadBalancerTypeEnumApplication, Scheme: elbtypes.LoadBalancerSchemeEnumInternetFacing,
				Subnets: s.PublicSubnetIDs, SecurityGroups: []string{s.SecurityGroupID}, Tags: s.Tags.WithRole("lb").elb(),
			}, elbNoRetry)
			if err != nil {
				return elbtypes.LoadBalancer{}, err
			}
			return created.LoadBalancers[0], nil
		})
		if err != nil {
			return LoadBalancer{}, p.classify(err, false)
		}
	}
	r := LoadBalancer{ARN: deref(lb.LoadBalancerArn), DNSName: deref(lb.DNSName), ZoneID: deref(lb.CanonicalHostedZoneId)}
	if lb.State != nil {
		r.State = string(lb.State.Code)
	}
	r.Ready = r.State == string(elbtypes.LoadBalancerStateEnumActive)
	return r, nil
}

func (p *Provider) elbOwned(ctx context.Context, t Tags, arn string) (bool, error) {
	out, err := p.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil {
		return false, p.classify(err, true)
	}
	m := map[string]string{}
	for _, d := range out.TagDescriptions {
		for _, tg := range d.Tags {
			m[deref(tg.Key)] = deref(tg.Value)
		}
	}
	return t.Owns(m), nil
}

// EnsureTargetGroup creates the pool's target group with the health check.
func (p *Provider) EnsureTargetGroup(ctx context.Context, s LBSpec) (string, error) {
	if s.HealthPath == "" {
		s.HealthPath = "/healthz"
	}
	if s.HealthPort == 0 {
		s.HealthPort = 80
	}
	name := lbName(s.Tags, "gt-")
	out, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{name}})
	if err == nil && len(out.TargetGroups) > 0 {
		tg := out.TargetGroups[0]
		arn := deref(tg.TargetGroupArn)
		if owned, err := p.elbOwned(ctx, s.Tags, arn); err != nil || !owned {
			return "", firstErr(err, alreadyExists("target group", name))
		}
		return arn, p.convergeHealthCheck(ctx, tg, s.HealthPath, fmt.Sprint(s.HealthPort))
	}
	if err != nil && !isCode(err, "TargetGroupNotFound") {
		return "", p.classify(err, false)
	}
	find := func(ctx context.Context) (string, bool, error) {
		out, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{name}})
		if isCode(err, "TargetGroupNotFound") {
			return "", false, nil
		}
		if err != nil || len(out.TargetGroups) == 0 {
			return "", false, err
		}
		arn := deref(out.TargetGroups[0].TargetGroupArn)
		if owned, err := p.elbOwned(ctx, s.Tags, arn); err != nil || !owned {
			return "", false, firstErr(err, alreadyExists("target group", name))
		}
		return arn, true, nil
	}
	// The name is the key, as for the load balancer.
	arn, err := createOnce(ctx, p.elb.Options().Retryer, find, func(ctx context.Context) (string, error) {
		created, err := p.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{
			Name: &name, Protocol: elbtypes.ProtocolEnumHttp, Port: ptr(int32(80)), VpcId: &s.VPCID,
			TargetType: elbtypes.TargetTypeEnumInstance, HealthCheckEnabled: ptr(true),
			HealthCheckPath: &s.HealthPath, HealthCheckPort: ptr(fmt.Sprint(s.HealthPort)), HealthCheckProtocol: elbtypes.ProtocolEnumHttp,
			Matcher: &elbtypes.Matcher{HttpCode: ptr("200-399")}, Tags: s.Tags.WithRole("target-group").elb(),
		}, elbNoRetry)
		if err != nil {
			return "", err
		}
		return deref(created.TargetGroups[0].TargetGroupArn), nil
	})
	return arn, p.classify(err, false)
}

// SetTargetGroupHealthCheck changes the health check of the job's target group (found by
// its name, and only when it carries the job's tags) to s's path and port.
func (p *Provider) SetTargetGroupHealthCheck(ctx context.Context, s LBSpec) error {
	name := lbName(s.Tags, "gt-")
	out, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{name}})
	if err != nil {
		return p.classify(err, false)
	}
	if len(out.TargetGroups) == 0 {
		return fault.UserAction(fmt.Errorf("target group %s is gone", name), "TargetGroupGone",
			"The pool's target group was deleted outside Groundwork; attach a load balancer again with vmOp attach_lb.", "")
	}
	tg := out.TargetGroups[0]
	if owned, err := p.elbOwned(ctx, s.Tags, deref(tg.TargetGroupArn)); err != nil || !owned {
		return firstErr(err, alreadyExists("target group", name))
	}
	return p.convergeHealthCheck(ctx, tg, s.HealthPath, fmt.Sprint(s.HealthPort))
}

// convergeHealthCheck sets the target group's health check path and port to the pool's, in
// place (a config update of healthCheckPath or healthCheckPort). It sends only what differs
// from what the group answered, so a step run again after a crash sends nothing twice; the
// targets stay registered and the balancer keeps serving while the checks move over.
func (p *Provider) convergeHealthCheck(ctx context.Context, tg elbtypes.TargetGroup, path, port string) error {
	in := &elbv2.ModifyTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}
	changed := false
	if deref(tg.HealthCheckPath) != path {
		in.HealthCheckPath, changed = &path, true
	}
	if deref(tg.HealthCheckPort) != port {
		in.HealthCheckPort, changed = &port, true
	}
	if !changed {
		return nil
	}
	_, err := p.elb.ModifyTargetGroup(ctx, in)
	return p.classify(err, false)
}

// EnsureListeners adds one listener per port forwarding to the target group: 443 is HTTPS with
// certARN, 80 is HTTP. Ports that already have a listener are left as they are.
func (p *Provider) EnsureListeners(ctx context.Context, s LBSpec, lbARN, tgARN, certARN string) ([]string, error) {
	ports := s.ListenerPorts
	if len(ports) == 0 {
		ports = []int32{80, 443}
	}
	out, err := p.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: &lbARN})
	if err != nil {
		return nil, p.classify(err, true)
	}
	have := map[int32]string{}
	for _, l := range out.Listeners {
		have[deref(l.Port)] = deref(l.ListenerArn)
	}
	var arns []string
	for _, port := range ports {
		if arn, ok := have[port]; ok {
			arns = append(arns, arn)
			continue
		}
		in := &elbv2.CreateListenerInput{
			LoadBalancerArn: &lbARN, Port: ptr(port), Protocol: elbtypes.ProtocolEnumHttp,
			DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: &tgARN}},
			Tags:           s.Tags.WithRole(fmt.Sprintf("listener-%d", port)).elb(),
		}
		if port == 443 {
			in.Protocol = elbtypes.ProtocolEnumHttps
			in.SslPolicy = ptr("ELBSecurityPolicy-TLS13-1-2-2021-06")
			in.Certificates = []elbtypes.Certificate{{CertificateArn: &certARN}}
		}
		// A listener is keyed by its port on this job's balancer: looked up before any repeat.
		find := func(ctx context.Context) (string, bool, error) {
			arn, err := p.listenerOn(ctx, lbARN, port)
			return arn, arn != "", err
		}
		arn, err := createOnce(ctx, p.elb.Options().Retryer, find, func(ctx context.Context) (string, error) {
			created, err := p.elb.CreateListener(ctx, in, elbNoRetry)
			if err != nil {
				return "", err
			}
			return deref(created.Listeners[0].ListenerArn), nil
		})
		if err != nil {
			return arns, p.classify(err, true)
		}
		arns = append(arns, arn)
	}
	return arns, nil
}

// listenerOn returns the ARN of the balancer's listener on port, or "".
func (p *Provider) listenerOn(ctx context.Context, lbARN string, port int32) (string, error) {
	out, err := p.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: &lbARN})
	if err != nil {
		return "", err
	}
	for _, l := range out.Listeners {
		if deref(l.Port) == port {
			return deref(l.ListenerArn), nil
		}
	}
	return "", nil
}

// EnsureCertificate returns the certificate for 443: the given ARN, else a self-signed one for
// domain imported into ACM (found again by its tags on a re-run). selfSigned tells the job to
// say so, since browsers will not trust it.
func (p *Provider) EnsureCertificate(ctx context.Context, t Tags, certARN, domain string) (arn string, selfSigned bool, err error) {
	if certARN != "" {
		return certARN, false, nil
	}
	if arn, found, err := p.findSelfSigned(ctx, t); err != nil || found {
		return arn, found, err
	}
	t = t.WithRole("certificate")
	certPEM, keyPEM, err := selfsigned.Certificate(domain)
	if err != nil {
		return "", false, fault.System(err)
	}
	m := t.Map()
	var tags []acmtypes.Tag
	for _, k := range sortedKeys(m) {
		tags = append(tags, acmtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	// ImportCertificate has no idempotency key: the tags in the same call are what a look-up
	// finds before any repeat.
	find := func(ctx context.Context) (string, bool, error) { return p.findSelfSigned(ctx, t) }
	arn, err = createOnce(ctx, p.acm.Options().Retryer, find, func(ctx context.Context) (string, error) {
		out, err := p.acm.ImportCertificate(ctx, &acm.ImportCertificateInput{Certificate: certPEM, PrivateKey: keyPEM, Tags: tags}, acmNoRetry)
		if err != nil {
			return "", err
		}
		return deref(out.CertificateArn), nil
	})
	if err != nil {
		return "", false, p.classify(err, false)
	}
	return arn, true, nil
}

// AttachLB puts the pool behind the target group: the ASG is attached (new instances register
// themselves), fixed instances are registered one by one. Repeating it is harmless.
func (p *Provider) AttachLB(ctx context.Context, t Tags, mode, tgARN string, vms []VM) error {
	if mode == ModeASG {
		_, err := p.asg.AttachLoadBalancerTargetGroups(ctx, &autoscaling.AttachLoadBalancerTargetGroupsInput{AutoScalingGroupName: ptr(poolName(t)), TargetGroupARNs: []string{tgARN}})
		return p.classify(err, true)
	}
	if len(vms) == 0 {
		return nil
	}
	var targets []elbtypes.TargetDescription
	for _, vm := range vms {
		targets = append(targets, elbtypes.TargetDescription{Id: ptr(vm.ID), Port: ptr(int32(80))})
	}
	_, err := p.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: &tgARN, Targets: targets})
	return p.classify(err, true)
}

// DetachLB takes the pool out of the target group without touching the VMs.
func (p *Provider) DetachLB(ctx context.Context, t Tags, mode, tgARN string, vms []VM) error {
	if mode == ModeASG {
		_, err := p.asg.DetachLoadBalancerTargetGroups(ctx, &autoscaling.DetachLoadBalancerTargetGroupsInput{AutoScalingGroupName: ptr(poolName(t)), TargetGroupARNs: []string{tgARN}})
		// Detaching a group that is not attached (a repeated detach) is success.
		if isCode(err, "ValidationError", "InvalidTarget") {
			return nil
		}
		return p.classify(err, false)
	}
	if len(vms) == 0 {
		return nil
	}
	var targets []elbtypes.TargetDescription
	for _, vm := range vms {
		targets = append(targets, elbtypes.TargetDescription{Id: ptr(vm.ID), Port: ptr(int32(80))})
	}
	_, err := p.elb.DeregisterTargets(ctx, &elbv2.DeregisterTargetsInput{TargetGroupArn: &tgARN, Targets: targets})
	if isCode(err, "TargetGroupNotFound", "InvalidTarget") {
		return nil
	}
	return p.classify(err, false)
}

// TargetIDs lists the instance IDs registered in the target group.
func (p *Provider) TargetIDs(ctx context.Context, tgARN string) ([]string, error) {
	out, err := p.elb.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: &tgARN})
	if err != nil {
		return nil, p.classify(err, false)
	}
	var ids []string
	for _, d := range out.TargetHealthDescriptions {
		ids = append(ids, deref(d.Target.Id))
	}
	return ids, nil
}

// DeleteLoadBalancer removes listeners, the ALB, the target group and a self-signed certificate
// of the job, each found by name or tag. Missing pieces are success.
func (p *Provider) DeleteLoadBalancer(ctx context.Context, t Tags) error {
	if err := p.DeleteListeners(ctx, t); err != nil {
		return err
	}
	if err := p.DeleteALB(ctx, t); err != nil {
		return err
	}
	return p.DeleteTargetGroup(ctx, t)
}

func (p *Provider) jobLB(ctx context.Context, t Tags) (*elbtypes.LoadBalancer, error) {
	out, err := p.elb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{lbName(t, "gw-")}})
	if isCode(err, "LoadBalancerNotFound") {
		return nil, nil
	}
	if err != nil {
		return nil, p.classify(err, false)
	}
	if len(out.LoadBalancers) == 0 {
		return nil, nil
	}
	return &out.LoadBalancers[0], nil
}

// DeleteListeners removes the ALB's listeners.
func (p *Provider) DeleteListeners(ctx context.Context, t Tags) error {
	lb, err := p.jobLB(ctx, t)
	if err != nil || lb == nil {
		return err
	}
	ls, err := p.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return p.classify(err, false)
	}
	for _, l := range ls.Listeners {
		if _, err := p.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: l.ListenerArn}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	return nil
}

// DeleteALB removes the ALB (and its listeners) and the job's self-signed certificate.
func (p *Provider) DeleteALB(ctx context.Context, t Tags) error {
	if err := p.DeleteListeners(ctx, t); err != nil {
		return err
	}
	lb, err := p.jobLB(ctx, t)
	if err != nil {
		return err
	}
	if lb != nil {
		if _, err := p.elb.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	arn, selfSigned, err := p.findSelfSigned(ctx, t)
	if err != nil || !selfSigned {
		return err
	}
	// ResourceInUse while the deleted LB still holds it: transient by classification.
	if _, err := p.acm.DeleteCertificate(ctx, &acm.DeleteCertificateInput{CertificateArn: &arn}); err != nil && !gone(err) {
		return p.classify(err, false)
	}
	return nil
}

// DeleteTargetGroup removes the job's target group.
func (p *Provider) DeleteTargetGroup(ctx context.Context, t Tags) error {
	out, err := p.elb.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{Names: []string{lbName(t, "gt-")}})
	if isCode(err, "TargetGroupNotFound") {
		return nil
	}
	if err != nil {
		return p.classify(err, false)
	}
	for _, tg := range out.TargetGroups {
		if _, err := p.elb.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil && !gone(err) {
			return p.classify(err, true) // ResourceInUse while a listener lets go: transient
		}
	}
	return nil
}

func (p *Provider) findSelfSigned(ctx context.Context, t Tags) (string, bool, error) {
	t = t.WithRole("certificate")
	list, err := p.acm.ListCertificates(ctx, &acm.ListCertificatesInput{})
	if err != nil {
		return "", false, p.classify(err, false)
	}
	for _, c := range list.CertificateSummaryList {
		tags, err := p.acm.ListTagsForCertificate(ctx, &acm.ListTagsForCertificateInput{CertificateArn: c.CertificateArn})
		if err != nil {
			return "", false, p.classify(err, false)
		}
		m := map[string]string{}
		for _, tg := range tags.Tags {
			m[deref(tg.Key)] = deref(tg.Value)
		}
		if t.Owns(m) && m[TagRole] == t.Role {
			return deref(c.CertificateArn), true, nil
		}
	}
	return "", false, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
