package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// RoleSpec asks for one IAM role assumable by Service, with managed policies attached, an
// optional inline policy, and optionally an instance profile of the same name.
type RoleSpec struct {
	Tags              Tags
	Service           string // e.g. "ec2.amazonaws.com"
	ManagedPolicyARNs []string
	InlinePolicy      string // a policy document, or empty
	InstanceProfile   bool
}

// Role is what EnsureRole made.
type Role struct {
	Name               string `json:"name"`
	ARN                string `json:"arn"`
	InstanceProfileARN string `json:"instanceProfileARN,omitempty"`
}

// RoleName is the deterministic name of a job's role, so a re-run finds it (IAM has no tag
// filter on GetRole).
func RoleName(t Tags) string {
	n := "gw-" + t.JobID + "-" + t.Role
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

const awsPolicy = "arn:aws:iam::aws:policy/"

// RolesFor lists the roles a family needs (the shared IAM step creates them).
func RolesFor(f job.Family, t Tags) []RoleSpec {
	switch f {
	case job.FamilyVMPool:
		// SSM is the exec channel: no SSH key is ever provisioned.
		return []RoleSpec{{Tags: t.WithRole("vm"), Service: "ec2.amazonaws.com", InstanceProfile: true,
			ManagedPolicyARNs: []string{awsPolicy + "AmazonSSMManagedInstanceCore", awsPolicy + "CloudWatchAgentServerPolicy"}}}
	case job.FamilyKubernetes:
		return []RoleSpec{
			{Tags: t.WithRole("eks-cluster"), Service: "eks.amazonaws.com", ManagedPolicyARNs: []string{awsPolicy + "AmazonEKSClusterPolicy"}},
			{Tags: t.WithRole("eks-node"), Service: "ec2.amazonaws.com", ManagedPolicyARNs: []string{
				awsPolicy + "AmazonEKSWorkerNodePolicy", awsPolicy + "AmazonEKS_CNI_Policy",
				awsPolicy + "AmazonEC2ContainerRegistryReadOnly", awsPolicy + "AmazonSSMManagedInstanceCore"}},
		}
	case job.FamilyDatastore:
		return []RoleSpec{{Tags: t.WithRole("rds-monitoring"), Service: "monitoring.rds.amazonaws.com",
			ManagedPolicyARNs: []string{awsPolicy + "service-role/AmazonRDSEnhancedMonitoringRole"}}}
	}
	return nil
}

func trustPolicy(service string) string {
	b, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect": "Allow", "Principal": map[string]string{"Service": service}, "Action": "sts:AssumeRole",
		}},
	})
	return string(b)
}

func (t Tags) iam() []iamtypes.Tag {
	m := t.Map()
	out := make([]iamtypes.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, iamtypes.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

// EnsureRole creates the role (or finds it, checking it is this job's), attaches its policies
// and makes its instance profile.
func (p *Provider) EnsureRole(ctx context.Context, s RoleSpec) (Role, error) {
	name := RoleName(s.Tags)
	r := Role{Name: name}
	created, err := p.iam.CreateRole(ctx, &iam.CreateRoleInput{
		RoleName: &name, AssumeRolePolicyDocument: ptr(trustPolicy(s.Service)), Tags: s.Tags.iam(),
		Description: ptr("Managed by Groundwork for job " + s.Tags.JobID),
	})
	switch {
	case err == nil:
		r.ARN = deref(created.Role.Arn)
	case isCode(err, "EntityAlreadyExists"):
		got, err := p.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
		if err != nil {
			return r, p.classify(err, true)
		}
		if !s.Tags.Owns(iamTagMap(got.Role.Tags)) {
			return r, alreadyExists("IAM role", name)
		}
		r.ARN = deref(got.Role.Arn)
	default:
		return r, p.classify(err, false)
	}
	for _, arn := range s.ManagedPolicyARNs {
		// Attaching an attached policy is a no-op in IAM.
		if _, err := p.iam.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: &name, PolicyArn: ptr(arn)}); err != nil {
			return r, p.classify(err, true)
		}
	}
	if s.InlinePolicy != "" {
		if _, err := p.iam.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: &name, PolicyName: ptr("groundwork"), PolicyDocument: &s.InlinePolicy}); err != nil {
			return r, p.classify(err, true)
		}
	}
	if !s.InstanceProfile {
		return r, nil
	}
	prof, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &name})
	var ip *iamtypes.InstanceProfile
	switch {
	case err == nil:
		ip = prof.InstanceProfile
	case isCode(err, "NoSuchEntity"):
		made, err := p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: &name, Tags: s.Tags.iam()})
		if err != nil && !isCode(err, "EntityAlreadyExists") {
			return r, p.classify(err, false)
		}
		if err == nil {
			ip = made.InstanceProfile
		} else if prof, err = p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &name}); err != nil {
			return r, p.classify(err, true)
		} else if !s.Tags.Owns(iamTagMap(prof.InstanceProfile.Tags)) {
			// A repeat after a lost answer meets the profile it made; a stranger's is refused.
			return r, alreadyExists("instance profile", name)
		} else {
			ip = prof.InstanceProfile
		}
	default:
		return r, p.classify(err, false)
	}
	r.InstanceProfileARN = deref(ip.Arn)
	for _, role := range ip.Roles {
		if deref(role.RoleName) == name {
			return r, nil
		}
	}
	if _, err := p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: &name, RoleName: &name}); err != nil && !isCode(err, "LimitExceeded") {
		return r, p.classify(err, true)
	}
	return r, nil
}

// DeleteRole removes a job's role, its policies and its instance profile. A missing role is
// success; a role that is not this job's is left alone.
func (p *Provider) DeleteRole(ctx context.Context, t Tags) error {
	name := RoleName(t)
	got, err := p.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: &name})
	if isCode(err, "NoSuchEntity") {
		return nil
	}
	if err != nil {
		return p.classify(err, false)
	}
	if !t.Owns(iamTagMap(got.Role.Tags)) {
		return nil
	}
	if prof, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: &name}); err == nil {
		for _, r := range prof.InstanceProfile.Roles {
			if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: &name, RoleName: r.RoleName}); err != nil && !gone(err) {
				return p.classify(err, false)
			}
		}
		if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: &name}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	} else if !isCode(err, "NoSuchEntity") {
		return p.classify(err, false)
	}
	attached, err := p.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: &name})
	if err != nil {
		return p.classify(err, false)
	}
	for _, ap := range attached.AttachedPolicies {
		if _, err := p.iam.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: &name, PolicyArn: ap.PolicyArn}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	inline, err := p.iam.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: &name})
	if err != nil {
		return p.classify(err, false)
	}
	for _, pn := range inline.PolicyNames {
		if _, err := p.iam.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: &name, PolicyName: ptr(pn)}); err != nil && !gone(err) {
			return p.classify(err, false)
		}
	}
	if _, err := p.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: &name}); err != nil && !gone(err) {
		return p.classify(err, false)
	}
	return nil
}

func iamTagMap(tags []iamtypes.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[deref(t.Key)] = deref(t.Value)
	}
	return m
}

// alreadyExists is the answer when a deterministic name is taken by something that is not this
// job's: adopting it silently could later delete a stranger's resource.
func alreadyExists(kind, name string) error {
	return fault.UserAction(fmt.Errorf("%s %q already exists and is not managed by this job", kind, name),
		"AlreadyExists", fmt.Sprintf("A %s named %q exists that this job did not create: rename or remove it, then retry.", kind, name),
		"https://console.aws.amazon.com/console/home?#search="+url.QueryEscape(name))
}
