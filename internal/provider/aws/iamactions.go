package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// IAMAction is the IAM action an SDK call needs: the service's IAM prefix and the operation
// name (they coincide for every service this provider calls).
func IAMAction(serviceID, operation string) string {
	return iamPrefix(serviceID) + ":" + operation
}

// The operations below are what each step's Do and Undo call, as recorded against moto by
// TestPlanListsEveryOperationAPipelineCalls (which fails when a step calls one not listed
// here), plus the permissions AWS checks without an API call of their own (iam:PassRole when
// a role is handed to a service, iam:CreateServiceLinkedRole on a service's first use, the
// SSM bootstrap probe that moto cannot run).

var networkOps = []string{
	"ec2:AssociateRouteTable", "ec2:AttachInternetGateway", "ec2:CreateInternetGateway", "ec2:CreateRoute",
	"ec2:CreateRouteTable", "ec2:CreateSubnet", "ec2:CreateVpc", "ec2:CreateTags", "ec2:DeleteInternetGateway",
	"ec2:DeleteRouteTable", "ec2:DeleteSubnet", "ec2:DeleteVpc", "ec2:DescribeAddresses",
	"ec2:DescribeAvailabilityZones", "ec2:DescribeInternetGateways", "ec2:DescribeNatGateways",
	"ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs",
	"ec2:DetachInternetGateway", "ec2:DisassociateRouteTable", "ec2:ModifySubnetAttribute", "ec2:ModifyVpcAttribute",
	// Drift inspection reads the VPC's DNS attributes back.
	"ec2:DescribeVpcAttribute",
}

// natOps are added when the network has a NAT gateway.
var natOps = []string{"ec2:AllocateAddress", "ec2:CreateNatGateway", "ec2:DeleteNatGateway", "ec2:ReleaseAddress"}

var peeringOps = []string{"ec2:AcceptVpcPeeringConnection", "ec2:CreateVpcPeeringConnection", "ec2:DeleteVpcPeeringConnection",
	"ec2:CreateRoute", "ec2:DescribeRouteTables", "ec2:DeleteRoute", "ec2:DescribeVpcs"}

var roleOps = []string{"iam:AttachRolePolicy", "iam:CreateRole", "iam:DeleteRole", "iam:DetachRolePolicy", "iam:GetInstanceProfile",
	"iam:GetRole", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies", "iam:TagRole", "iam:PutRolePolicy", "iam:DeleteRolePolicy"}

var instanceProfileOps = []string{"iam:AddRoleToInstanceProfile", "iam:CreateInstanceProfile", "iam:DeleteInstanceProfile",
	"iam:RemoveRoleFromInstanceProfile"}

var secretOps = []string{"secretsmanager:CreateSecret", "secretsmanager:DeleteSecret", "secretsmanager:DescribeSecret",
	"secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:TagResource"}

// StepPlan is what step of j does in the account: the resources it creates or adopts and the
// operations its Do and Undo call. A step this provider does not know calls nothing.
func StepPlan(j *job.Job, step string) plan.Step {
	name := jobName(j)
	var res []plan.Resource
	var ops []string
	create := func(typ, n string, count int) {
		res = append(res, plan.Resource{Type: typ, Action: plan.ActionCreate, Name: n, Count: count})
	}
	adopt := func(typ, n string) { res = append(res, plan.Resource{Type: typ, Action: plan.ActionAdopt, Name: n}) }
	netw := func(vpcID string, nat bool) {
		if vpcID != "" {
			adopt("aws_vpc", vpcID)
			ops = append(ops, "ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeAvailabilityZones", "ec2:DescribeRouteTables",
				"ec2:DescribeInternetGateways", "ec2:DescribeNatGateways", "ec2:DescribeAddresses", "ec2:DescribeSecurityGroups")
			return
		}
		create("aws_vpc", name, 1)
		create("aws_subnet", name, 0)
		create("aws_internet_gateway", name, 1)
		create("aws_route_table", name, 0)
		ops = append(ops, networkOps...)
		if nat {
			create("aws_eip", name+"-nat", 1)
			create("aws_nat_gateway", name, 1)
			ops = append(ops, natOps...)
		}
	}
	switch j.Family {
	case job.FamilyNetwork:
		var c network.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case network.StepNetwork:
			netw(c.VPCID, !c.NoNAT)
		case network.StepPeering:
			// Also without peering: a config update that takes the peering away deletes it.
			ops = append(ops, "ec2:DescribeVpcPeeringConnections", "ec2:DeleteVpcPeeringConnection", "ec2:DescribeRouteTables", "ec2:DeleteRoute")
			if c.Peering != nil {
				create("aws_vpc_peering_connection", name+"-"+c.Peering.PeerVPCID, 1)
				ops = append(ops, peeringOps...)
			}
		}
	case job.FamilyVMPool:
		c, _ := vmpool.DecodeConfig(j.Config)
		switch step {
		case vmpool.StepNetwork:
			netw(c.VPCID, true)
		case vmpool.StepIAM:
			create("aws_iam_role", "gw-"+j.ID+"-vm", 1)
			create("aws_iam_instance_profile", "gw-"+j.ID+"-vm", 1)
			ops = append(append(ops, roleOps...), instanceProfileOps...)
		case vmpool.StepLaunchTemplate:
			create("aws_security_group", name, 0)
			create("aws_launch_template", name, 1)
			// RevokeSecurityGroupIngress: the step converges its groups (reconcile revokes
			// ingress added outside Groundwork).
			ops = append(ops, "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:CreateLaunchTemplate", "ec2:CreateSecurityGroup", "ec2:CreateTags",
				"ec2:DeleteLaunchTemplate", "ec2:DeleteSecurityGroup", "ec2:DescribeImages", "ec2:DescribeLaunchTemplates",
				"ec2:DescribeSecurityGroups", "iam:PassRole",
				// A changed config adds a version and makes it the default.
				"ec2:CreateLaunchTemplateVersion", "ec2:DescribeLaunchTemplateVersions", "ec2:ModifyLaunchTemplate")
		case vmpool.StepVMs:
			ops = append(ops, "ec2:DescribeInstances", "autoscaling:DescribeAutoScalingGroups", "iam:PassRole", "ssm:SendCommand", "ssm:GetCommandInvocation",
				"ec2:GetConsoleOutput")
			if c.Mode == "asg" {
				create("aws_autoscaling_group", name, 1)
				ops = append(ops, "autoscaling:CreateAutoScalingGroup", "autoscaling:DeleteAutoScalingGroup",
					"autoscaling:DescribeAutoScalingGroups", "autoscaling:UpdateAutoScalingGroup", "autoscaling:StartInstanceRefresh",
					"autoscaling:AttachLoadBalancerTargetGroups", "autoscaling:DetachLoadBalancerTargetGroups",
					"ec2:RunInstances", "ec2:CreateTags", "iam:CreateServiceLinkedRole",
					// The scaling policy, and a roll (vmOp roll: its surge, base tag and the old
					// instances' ends).
					"autoscaling:PutScalingPolicy", "autoscaling:DescribePolicies", "autoscaling:DeletePolicy",
					"autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags", "autoscaling:TerminateInstanceInAutoScalingGroup",
					// A roll holds the scaling policy's alarms (and schedules, rebalancing) off.
					"autoscaling:SuspendProcesses", "autoscaling:ResumeProcesses")
			} else {
				create("aws_instance", name, int(c.Desired))
				ops = append(ops, "ec2:RunInstances", "ec2:TerminateInstances", "ec2:CreateTags")
			}
			// A roll reads the template's default version and takes old instances out of the
			// target group.
			ops = append(ops, "ec2:DescribeLaunchTemplates")
			if c.CreateLoadBalancer {
				ops = append(ops, "elasticloadbalancing:DescribeTargetHealth", "elasticloadbalancing:RegisterTargets",
					"elasticloadbalancing:DeregisterTargets")
			}
		case vmpool.StepLoadBalancer:
			create("aws_lb", name, 1)
			ops = append(ops, "elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:DeleteLoadBalancer",
				"elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTags",
				"elasticloadbalancing:AddTags", "acm:DeleteCertificate", "acm:ListCertificates", "acm:ListTagsForCertificate",
				"iam:CreateServiceLinkedRole")
		case vmpool.StepTargetGroup:
			create("aws_lb_target_group", name, 1)
			ops = append(ops, "elasticloadbalancing:CreateTargetGroup", "elasticloadbalancing:DeleteTargetGroup",
				"elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:DescribeTargetGroups", "elasticloadbalancing:RegisterTargets",
				"elasticloadbalancing:AddTags", "autoscaling:AttachLoadBalancerTargetGroups", "autoscaling:DetachLoadBalancerTargetGroups",
				// A config update of the health check path or port changes the group in place
				// (finalize calls it, on the group this step made).
				"elasticloadbalancing:ModifyTargetGroup")
		case vmpool.StepListeners:
			create("aws_lb_listener", name, len(c.ListenerPorts))
			ops = append(ops, "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
				"elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:AddTags")
			if slices.Contains(c.ListenerPorts, 443) && c.CertificateARN == "" {
				create("aws_acm_certificate", name+"-self-signed", 1)
				ops = append(ops, "acm:ImportCertificate", "acm:ListCertificates", "acm:AddTagsToCertificate")
			}
		case vmpool.StepDNSRecord:
			if c.Domain != "" {
				create("aws_route53_record", c.Domain, 1)
				ops = append(ops, "route53:ChangeResourceRecordSets", "route53:GetHostedZone", "route53:ListResourceRecordSets", "route53:GetChange")
			}
		}
	case job.FamilyKubernetes:
		var c kubernetes.Config
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case kubernetes.StepNetwork:
			netw(c.VPCID, true)
		case kubernetes.StepIAM:
			create("aws_iam_role", "gw-"+j.ID+"-eks-cluster", 1)
			create("aws_iam_role", "gw-"+j.ID+"-eks-node", 1)
			ops = append(ops, roleOps...)
		case kubernetes.StepCluster:
			create("aws_eks_cluster", c.Name, 1)
			for _, ng := range c.NodeGroups {
				create("aws_eks_node_group", ng.Name, 1)
			}
			ops = append(ops, "eks:CreateCluster", "eks:CreateNodegroup", "eks:DeleteCluster", "eks:DeleteNodegroup", "eks:DescribeCluster",
				"eks:DescribeNodegroup", "eks:ListNodegroups", "eks:TagResource", "eks:UpdateNodegroupConfig", "eks:UpdateClusterVersion", "eks:UpdateNodegroupVersion", "eks:DescribeUpdate", "iam:PassRole", "iam:CreateServiceLinkedRole")
		}
	case job.FamilyRegistry:
		if step == "create_repository" {
			create("aws_ecr_repository", name, 1)
			ops = append(ops, "ecr:CreateRepository", "ecr:DeleteRepository", "ecr:DescribeRepositories", "ecr:TagResource")
		}
	case job.FamilyDNSZone:
		var c struct {
			Records []struct {
				Name string `json:"name"`
			} `json:"records"`
		}
		_ = json.Unmarshal(j.Config, &c)
		switch step {
		case "create_zone":
			create("aws_route53_zone", name, 1)
			ops = append(ops, "route53:ChangeTagsForResource", "route53:CreateHostedZone", "route53:DeleteHostedZone",
				"route53:GetHostedZone", "route53:ListHostedZonesByName", "route53:ListResourceRecordSets", "route53:ChangeResourceRecordSets")
		case "create_records":
			if len(c.Records) > 0 {
				create("aws_route53_record", name, len(c.Records))
				ops = append(ops, "route53:ChangeResourceRecordSets", "route53:ListResourceRecordSets")
			}
		}
	case job.FamilyDatastore:
		var c struct {
			Engine string `json:"engine"`
			Host   string `json:"host"`
		}
		_ = json.Unmarshal(j.Config, &c)
		if j.Mode == job.ModeAdopt {
			if step == "create_server" {
				adopt("aws_datastore_server", c.Host)
			}
			break
		}
		redis := c.Engine == "redis"
		switch step {
		case "network":
			netw("", false)
		case "credentials":
			create("aws_secretsmanager_secret", j.ID+"/admin", 1)
			ops = append(ops, secretOps...)
		case "create_server":
			ops = append(ops, "ec2:CreateRoute", "ec2:DescribeAvailabilityZones", "ec2:DescribeInternetGateways", "ec2:DescribeRouteTables",
				"ec2:DescribeSubnets", "ec2:DescribeVpcs", "ec2:ModifyVpcAttribute", "secretsmanager:DeleteSecret", "secretsmanager:GetSecretValue",
				"iam:CreateServiceLinkedRole")
			if redis {
				create("aws_elasticache_subnet_group", name, 1)
				create("aws_elasticache_replication_group", name, 1)
				ops = append(ops, "elasticache:CreateCacheSubnetGroup", "elasticache:CreateReplicationGroup", "elasticache:DeleteCacheSubnetGroup",
					"elasticache:DeleteReplicationGroup", "elasticache:DescribeReplicationGroups", "elasticache:DescribeCacheSubnetGroups",
					"elasticache:AddTagsToResource")
			} else {
				create("aws_db_subnet_group", name, 1)
				create("aws_db_instance", name, 1)
				// ModifyDBInstance: a config update re-runs this step against the instance.
				ops = append(ops, "rds:CreateDBInstance", "rds:CreateDBSubnetGroup", "rds:DeleteDBInstance", "rds:DeleteDBSubnetGroup",
					"rds:DescribeDBInstances", "rds:DescribeDBSubnetGroups", "rds:AddTagsToResource", "rds:ModifyDBInstance")
			}
		case "wait_ready":
			ops = append(ops, "secretsmanager:GetSecretValue")
			if redis {
				ops = append(ops, "elasticache:DescribeReplicationGroups")
			} else {
				ops = append(ops, "rds:DescribeDBInstances")
			}
		case "register":
			ops = append(ops, "secretsmanager:GetSecretValue")
		}
	}
	return plan.NewStep(step, res, ops)
}

// jobName is the name the job's resources are known by: the job's, else its config's, else
// its ID.
func jobName(j *job.Job) string {
	if j.Name != "" {
		return j.Name
	}
	var c struct {
		Name   string `json:"name"`
		Domain string `json:"domain"`
	}
	if json.Unmarshal(j.Config, &c) == nil && c.Domain != "" {
		return c.Domain
	}
	if c.Name != "" {
		return c.Name
	}
	return j.ID
}

// PlanSource plans the jobs of AWS spaces (plan.Source).
type PlanSource struct{}

// Knows implements plan.Source: the families with a table in StepPlan.
func (PlanSource) Knows(j *job.Job) bool {
	return slices.Contains([]job.Family{job.FamilyNetwork, job.FamilyVMPool, job.FamilyKubernetes, job.FamilyRegistry,
		job.FamilyDNSZone, job.FamilyDatastore}, j.Family)
}

// Steps implements plan.Source.
func (PlanSource) Steps(_ context.Context, j *job.Job, names []string) ([]plan.Step, error) {
	out := make([]plan.Step, len(names))
	for i, n := range names {
		out[i] = StepPlan(j, n)
	}
	return out, nil
}

// Policy implements plan.Source.
func (PlanSource) Policy(j *job.Job, operations []string) (plan.Policy, error) {
	doc, err := PolicyDocument(j.OrgID, operations)
	if err != nil {
		return plan.Policy{}, err
	}
	return plan.Policy{Format: plan.FormatAWS, Document: doc}, nil
}

// Statement is one IAM policy statement.
type Statement struct {
	Sid       string                       `json:"Sid"`
	Effect    string                       `json:"Effect"`
	Action    []string                     `json:"Action"`
	Resource  []string                     `json:"Resource"`
	Condition map[string]map[string]string `json:"Condition,omitempty"`
}

// PolicyDocument is an IAM identity policy granting exactly operations, scoped where IAM
// allows it:
//   - reads (Describe*, List*, Get* but secret values) on any resource: most of them support
//     no resource-level permission;
//   - IAM actions only on roles and instance profiles named gw-* (the names the IAM step
//     gives), and iam:PassRole only of those roles;
//   - changes to existing resources (delete, terminate, modify, detach, read a secret's
//     value) only on resources tagged groundwork:orgId with orgID, which every resource this
//     provider creates carries from its creation, so teardown reaches only the org's own;
//   - Route 53 zone changes on hosted zones (Route 53 has no tag condition keys);
//   - creating calls on any resource: the resource does not exist yet to be scoped by.
func PolicyDocument(orgID string, operations []string) (json.RawMessage, error) {
	var read, iamRole, iamProfile, pass, owned, zones, create, slr []string
	for _, op := range plan.SortedUnique(operations) {
		svc, name, ok := strings.Cut(op, ":")
		if !ok {
			return nil, fmt.Errorf("operation %q is not service:Action", op)
		}
		switch {
		case op == "iam:PassRole":
			pass = append(pass, op)
		case op == "iam:CreateServiceLinkedRole":
			slr = append(slr, op)
		case svc == "iam" && strings.Contains(name, "InstanceProfile"):
			iamProfile = append(iamProfile, op)
		case svc == "iam":
			iamRole = append(iamRole, op)
		case op == "secretsmanager:GetSecretValue":
			owned = append(owned, op)
		case hasAnyPrefix(name, "Describe", "List", "Get"):
			read = append(read, op)
		case svc == "route53" && op != "route53:CreateHostedZone":
			zones = append(zones, op)
		case svc != "route53" && svc != "ssm" && hasAnyPrefix(name, "Delete", "Terminate", "Release", "Detach", "Disassociate",
			"Deregister", "Revoke", "Update", "Modify", "PutSecretValue", "StartInstanceRefresh"):
			owned = append(owned, op)
		default:
			create = append(create, op)
		}
	}
	var st []Statement
	add := func(sid string, actions, resources []string, cond map[string]map[string]string) {
		if len(actions) > 0 {
			st = append(st, Statement{Sid: sid, Effect: "Allow", Action: actions, Resource: resources, Condition: cond})
		}
	}
	add("GroundworkRead", read, []string{"*"}, nil)
	add("GroundworkCreate", create, []string{"*"}, nil)
	add("GroundworkChangeOwnResources", owned, []string{"*"}, map[string]map[string]string{
		"StringEquals": {"aws:ResourceTag/" + TagOrgID: orgID}})
	add("GroundworkRoles", iamRole, []string{"arn:aws:iam::*:role/gw-*"}, nil)
	add("GroundworkInstanceProfiles", iamProfile, []string{"arn:aws:iam::*:instance-profile/gw-*", "arn:aws:iam::*:role/gw-*"}, nil)
	add("GroundworkPassOwnRoles", pass, []string{"arn:aws:iam::*:role/gw-*"}, nil)
	add("GroundworkServiceLinkedRoles", slr, []string{"arn:aws:iam::*:role/aws-service-role/*"}, nil)
	add("GroundworkHostedZones", zones, []string{"arn:aws:route53:::hostedzone/*", "arn:aws:route53:::change/*"}, nil)
	doc := map[string]any{"Version": "2012-10-17", "Statement": st}
	if len(st) == 0 {
		// IAM refuses a policy without a statement; nothing to grant is said as no action.
		doc["Statement"] = []Statement{}
	}
	return json.Marshal(doc)
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
