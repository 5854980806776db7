package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/elasticache"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/rds"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// Provider holds one account-and-region's SDK clients. Its methods are the drivers; the
// pipelines declare the interfaces they need and Provider satisfies them.
type Provider struct {
	cfg    aws.Config
	region string

	ec2 *ec2.Client
	iam *iam.Client
	ecr *ecr.Client
	sm  *secretsmanager.Client
	r53 *route53.Client
	rds *rds.Client
	ec  *elasticache.Client
	asg *autoscaling.Client
	elb *elbv2.Client
	acm *acm.Client
	eks *eks.Client
	sts *sts.Client
}

// New builds a provider on cfg.
func New(cfg aws.Config) *Provider {
	return &Provider{
		cfg: cfg, region: cfg.Region,
		ec2: ec2.NewFromConfig(cfg), iam: iam.NewFromConfig(cfg), ecr: ecr.NewFromConfig(cfg),
		sm: secretsmanager.NewFromConfig(cfg), r53: route53.NewFromConfig(cfg), rds: rds.NewFromConfig(cfg),
		ec: elasticache.NewFromConfig(cfg), asg: autoscaling.NewFromConfig(cfg), elb: elbv2.NewFromConfig(cfg),
		acm: acm.NewFromConfig(cfg), eks: eks.NewFromConfig(cfg), sts: sts.NewFromConfig(cfg),
	}
}

// Open loads the account's configuration and builds a provider on it.
func Open(ctx context.Context, a Account) (*Provider, error) {
	cfg, err := LoadConfig(ctx, a)
	if err != nil {
		return nil, err
	}
	return New(cfg), nil
}

// Region is the provider's region.
func (p *Provider) Region() string { return p.region }

// Config is the SDK configuration (for callers that need a client this package lacks).
func (p *Provider) Config() aws.Config { return p.cfg }

// AccountID asks STS who the credentials belong to.
func (p *Provider) AccountID(ctx context.Context) (string, error) {
	out, err := p.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", p.classify(err, false)
	}
	return deref(out.Account), nil
}

func (p *Provider) classify(err error, afterCreate bool) error {
	return Classify(err, Op{Region: p.region, AfterCreate: afterCreate})
}

// InstanceRefresher starts a rolling replacement of an ASG's instances. Moto does not implement
// StartInstanceRefresh, so tests give the provider FakeRefresher; production uses the SDK.
type InstanceRefresher interface {
	StartInstanceRefresh(ctx context.Context, asgName string) (refreshID string, err error)
}
