package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/secrets/secretstest"
)

func TestIAMRolesPerFamily(t *testing.T) {
	t.Parallel()
	for _, fam := range []job.Family{job.FamilyVMPool, job.FamilyKubernetes, job.FamilyDatastore} {
		t.Run(string(fam), func(t *testing.T) {
			t.Parallel()
			p, _ := testProvider(t, "us-west-2")
			ctx, tags := testCtx(t), testTags(t)
			specs := RolesFor(fam, tags)
			for round := 0; round < 2; round++ { // the second round must create nothing new
				for _, s := range specs {
					r, err := p.EnsureRole(ctx, s)
					if err != nil {
						t.Fatalf("round %d ensure %s: %v", round, s.Tags.Role, err)
					}
					if s.InstanceProfile && r.InstanceProfileARN == "" {
						t.Fatalf("no instance profile for %s", s.Tags.Role)
					}
					att, err := p.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: &r.Name})
					if err != nil || len(att.AttachedPolicies) != len(s.ManagedPolicyARNs) {
						t.Fatalf("attached = %v, %v; want %d", att, err, len(s.ManagedPolicyARNs))
					}
				}
				if n := countRoles(t, p); n != len(specs) {
					t.Fatalf("round %d: %d roles, want %d", round, n, len(specs))
				}
			}
			for _, s := range specs {
				if err := p.DeleteRole(ctx, s.Tags); err != nil {
					t.Fatal(err)
				}
			}
			if n := countRoles(t, p); n != 0 {
				t.Fatalf("%d roles left", n)
			}
			profs, err := p.iam.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
			if err != nil || len(profs.InstanceProfiles) != 0 {
				t.Fatalf("instance profiles left: %v %v", profs, err)
			}
		})
	}
}

func TestIAMRoleOfAnotherJobIsNotAdopted(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "us-west-2")
	ctx, tags := testCtx(t), testTags(t)
	spec := RolesFor(job.FamilyVMPool, tags)[0]
	if _, err := p.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: ptr(RoleName(spec.Tags)), AssumeRolePolicyDocument: ptr(trustPolicy("ec2.amazonaws.com"))}); err != nil {
		t.Fatal(err)
	}
	_, err := p.EnsureRole(ctx, spec)
	if fault.ClassOf(err) != job.ClassUserAction || fault.As(err).Code != "AlreadyExists" {
		t.Fatalf("err = %v, want user_action AlreadyExists", err)
	}
	if err := p.DeleteRole(ctx, spec.Tags); err != nil {
		t.Fatal(err)
	}
	if _, err := p.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: ptr(RoleName(spec.Tags))}); err != nil {
		t.Fatalf("a stranger's role was deleted: %v", err)
	}
}

func countRoles(t *testing.T, p *Provider) int {
	t.Helper()
	out, err := p.iam.ListRoles(testCtx(t), &iam.ListRolesInput{PathPrefix: ptr("/")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range out.Roles {
		if len(deref(r.RoleName)) > 3 && deref(r.RoleName)[:3] == "gw-" {
			n++
		}
	}
	return n
}

func TestECRRepository(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx, tags := testCtx(t), testTags(t).WithRole("registry")
	spec := RepositorySpec{Tags: tags, Name: "team/checkout", ScanOnPush: true}
	a, err := p.EnsureRepository(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.EnsureRepository(ctx, spec)
	if err != nil || b.ARN != a.ARN || a.URI == "" {
		t.Fatalf("second ensure = %+v, %v; first %+v", b, err, a)
	}
	other := spec
	other.Tags.JobID = "job_other"
	if _, err := p.EnsureRepository(ctx, other); fault.ClassOf(err) != job.ClassUserAction {
		t.Fatalf("another job's ensure = %v, want user_action", err)
	}
	if err := p.DeleteRepository(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteRepository(ctx, spec.Name); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	out, err := p.ecr.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{})
	if err != nil || len(out.Repositories) != 0 {
		t.Fatalf("repositories left: %v %v", out, err)
	}
}

func TestSecretsManagerStore(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "eu-west-1")
	ctx := testCtx(t)
	s := p.Secrets(testTags(t))
	ref, err := s.Put(ctx, "groundwork/job/admin", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, ref); err != nil || got != "s3cret" {
		t.Fatalf("get = %q, %v", got, err)
	}
	ref2, err := s.Put(ctx, "groundwork/job/admin", "rotated")
	if err != nil || ref2 != ref {
		t.Fatalf("overwrite ref = %q, %v; want %q", ref2, err, ref)
	}
	if got, _ := s.Get(ctx, ref); got != "rotated" {
		t.Fatalf("after overwrite = %q", got)
	}
	if err := s.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, ref); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.Get(ctx, ref); err == nil {
		t.Fatal("secret readable after delete")
	}
	list, err := p.sm.ListSecrets(ctx, &secretsmanager.ListSecretsInput{})
	if err != nil || len(list.SecretList) != 0 {
		t.Fatalf("secrets left: %v %v", list, err)
	}
}

func TestDNSZoneRecordsAndPeering(t *testing.T) {
	t.Parallel()
	p, _ := testProvider(t, "us-east-1")
	ctx, tags := testCtx(t), testTags(t)
	zt := tags.WithRole("zone")
	z, err := p.EnsureZone(ctx, ZoneSpec{Tags: zt, Name: "apps.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	z2, err := p.EnsureZone(ctx, ZoneSpec{Tags: zt, Name: "apps.example.com"})
	if err != nil || z2.ID != z.ID {
		t.Fatalf("second ensure = %+v, %v; first %+v", z2, err, z)
	}
	rec := Record{Name: "www.apps.example.com", Type: "A", Values: []string{"10.0.0.10"}}
	for i := 0; i < 2; i++ {
		if err := p.UpsertRecord(ctx, z.ID, rec); err != nil {
			t.Fatal(err)
		}
	}
	zones, _ := p.r53.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
	if len(zones.HostedZones) != 1 {
		t.Fatalf("%d zones, want 1", len(zones.HostedZones))
	}
	if err := p.DeleteZone(ctx, zt, "apps.example.com"); err != nil {
		t.Fatal(err)
	}
	zones, _ = p.r53.ListHostedZones(ctx, &route53.ListHostedZonesInput{})
	if len(zones.HostedZones) != 0 {
		t.Fatalf("%d zones left", len(zones.HostedZones))
	}

	a, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: tags.WithRole("a"), NoNAT: true, CIDR: "10.1.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	bTags := Tags{OrgID: tags.OrgID, JobID: tags.JobID + "b"}
	b, err := p.EnsureNetwork(ctx, NetworkSpec{Tags: bTags, NoNAT: true, CIDR: "10.2.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	pt := tags.WithRole("peering")
	id, err := p.EnsurePeering(ctx, PeeringSpec{Tags: pt, VPCID: a.VPCID, PeerVPCID: b.VPCID})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := p.EnsurePeering(ctx, PeeringSpec{Tags: pt, VPCID: a.VPCID, PeerVPCID: b.VPCID})
	if err != nil || id2 != id {
		t.Fatalf("second peering = %s, %v; want %s", id2, err, id)
	}
	got, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{VpcPeeringConnectionIds: []string{id}})
	if err != nil || got.VpcPeeringConnections[0].Status.Code != "active" {
		t.Fatalf("peering not active: %+v %v", got, err)
	}
	if err := p.DeletePeering(ctx, pt); err != nil {
		t.Fatal(err)
	}
	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, tags) })
	deleteUntilDone(t, func() (bool, error) { return p.DeleteNetwork(ctx, bTags) })
	if n := countJobEC2(t, p, tags) + countJobEC2(t, p, bTags); n != 0 {
		t.Fatalf("%d resources left", n)
	}
}

func TestSecretsManagerConformance(t *testing.T) {
	t.Parallel()
	secretstest.Run(t, func(t *testing.T) secrets.SecretStore {
		p, _ := testProvider(t, "eu-north-1")
		return p.Secrets(testTags(t))
	})
}
