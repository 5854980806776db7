package pricing

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
	"github.com/groundworkhq/groundwork/internal/pipeline/network"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// AWS says what a job on AWS pays for, from its config, as the AWS provider builds it: a new
// network has one NAT gateway with one Elastic IP; an ALB spans two zones; RDS storage is
// gp2; a datastore's own network has no NAT.
type AWS struct{}

// Usage implements UsageSource.
func (AWS) Usage(j *job.Job) ([]Usage, []string, error) {
	var out []Usage
	var notes []string
	nat := func() {
		out = append(out,
			Usage{Item: "NAT gateway", SKU: "vpc.nat", Quantity: 1},
			Usage{Item: "public IPv4 address (NAT gateway)", SKU: "vpc.public-ipv4", Quantity: 1})
	}
	switch j.Family {
	case job.FamilyNetwork:
		var c network.Config
		_ = json.Unmarshal(j.Config, &c)
		if c.VPCID == "" && !c.NoNAT {
			nat()
		}
		if c.VPCID == "" && c.NoNAT {
			notes = append(notes, "VPC, subnets, route tables and internet gateway have no hourly price")
		}
	case job.FamilyVMPool:
		c, err := vmpool.DecodeConfig(j.Config)
		if err != nil {
			return nil, nil, err
		}
		if c.VPCID == "" {
			nat()
		}
		out = append(out, Usage{Item: "EC2 " + c.InstanceType, SKU: "ec2.instance." + c.InstanceType, Quantity: float64(c.Desired)},
			Usage{Item: "EBS root volumes", Quantity: float64(c.Desired), Unpriced: "unknown: the image decides the root volume's size"})
		if c.Mode == "asg" && c.Max > c.Desired {
			notes = append(notes, fmt.Sprintf("the ASG at its desired size %d (it may grow to %d)", c.Desired, c.Max))
		}
		if c.CreateLoadBalancer {
			out = append(out, Usage{Item: "application load balancer", SKU: "elb.alb", Quantity: 1},
				Usage{Item: "public IPv4 addresses (load balancer, one per zone)", SKU: "vpc.public-ipv4", Quantity: 2})
		}
	case job.FamilyKubernetes:
		var c kubernetes.Config
		_ = json.Unmarshal(j.Config, &c)
		if c.VPCID == "" {
			nat()
		}
		out = append(out, Usage{Item: "EKS cluster", SKU: "eks.cluster", Quantity: 1})
		for _, ng := range c.NodeGroups {
			out = append(out, Usage{Item: fmt.Sprintf("EC2 %s (node group %s)", ng.InstanceType, ng.Name), SKU: "ec2.instance." + ng.InstanceType,
				Quantity: float64(ng.Min)},
				Usage{Item: fmt.Sprintf("EBS node volumes (node group %s)", ng.Name), Quantity: float64(ng.Min),
					Unpriced: "unknown: the node image decides the volume's size"})
			if ng.Max > ng.Min {
				notes = append(notes, fmt.Sprintf("node group %s at its minimum %d nodes (it may grow to %d)", ng.Name, ng.Min, ng.Max))
			}
		}
	case job.FamilyRegistry:
		out = append(out, Usage{Item: "ECR storage", SKU: "ecr.storage", Quantity: 0, Note: "per GB of images pushed; nothing is stored at creation"})
	case job.FamilyDNSZone:
		out = append(out, Usage{Item: "Route 53 hosted zone", SKU: "route53.zone", Quantity: 1})
		notes = append(notes, "DNS queries not included")
	case job.FamilyDatastore:
		var c struct {
			Engine             string `json:"engine"`
			InstanceClass      string `json:"instanceClass"`
			AllocatedStorageGB int    `json:"allocatedStorageGB"`
			MultiAZ            bool   `json:"multiAZ"`
		}
		_ = json.Unmarshal(j.Config, &c)
		if j.Mode == job.ModeAdopt {
			notes = append(notes, "an adopted server is billed as it is today; Groundwork adds nothing")
			break
		}
		// The AWS driver's defaults when the request leaves them out.
		if c.Engine == "redis" {
			if c.InstanceClass == "" {
				c.InstanceClass = "cache.t3.micro"
			}
			nodes := 1.0
			if c.MultiAZ {
				nodes = 2
			}
			out = append(out, Usage{Item: "ElastiCache " + c.InstanceClass, SKU: "elasticache." + c.InstanceClass, Quantity: nodes})
			break
		}
		if c.InstanceClass == "" {
			c.InstanceClass = "db.t3.micro"
		}
		if c.AllocatedStorageGB == 0 {
			c.AllocatedStorageGB = 20
		}
		az := "single-az"
		if c.MultiAZ {
			az = "multi-az"
		}
		engine := c.Engine
		if !slices.Contains([]string{"postgres", "mysql"}, engine) {
			engine = "postgres"
		}
		out = append(out, Usage{Item: fmt.Sprintf("RDS %s %s %s", engine, c.InstanceClass, az), SKU: fmt.Sprintf("rds.%s.%s.%s", engine, c.InstanceClass, az), Quantity: 1},
			Usage{Item: "RDS storage gp2 " + az, SKU: "rds.storage.gp2." + az, Quantity: float64(c.AllocatedStorageGB)})
		notes = append(notes, "backup storage up to the database's size is free")
	}
	return out, notes, nil
}
