package aws

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	rdstypes "github.com/aws/aws-sdk-go-v2/service/rds/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// opErr wraps an API error the way the SDK returns it from a client call.
func opErr(service, operation string, err error, status int) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	return &smithy.OperationError{ServiceID: service, OperationName: operation, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
		RequestID:     "req-1",
	}}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		err         error
		afterCreate bool
		class       job.FailureClass
		code        string
		hintHas     string
		consoleHas  string
	}{
		"ec2 unauthorized names the permission from the message": {
			err:   opErr("EC2", "CreateVpc", &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform: ec2:CreateVpc on resource"}, 403),
			class: job.ClassUserAction, code: "UnauthorizedOperation", hintHas: "ec2:CreateVpc", consoleHas: "iam",
		},
		"iam access denied falls back to the operation": {
			err:   opErr("IAM", "CreateRole", &smithy.GenericAPIError{Code: "AccessDenied", Message: "denied"}, 403),
			class: job.ClassUserAction, code: "AccessDenied", hintHas: "iam:CreateRole", consoleHas: "iam",
		},
		"typed iam quota": {
			err:   opErr("IAM", "CreateRole", &iamtypes.LimitExceededException{Message: ptr("roles")}, 409),
			class: job.ClassUserAction, code: "LimitExceeded", hintHas: "iam quota", consoleHas: "servicequotas/home/services/iam",
		},
		"typed rds quota": {
			err:   opErr("RDS", "CreateDBInstance", &rdstypes.InstanceQuotaExceededFault{Message: ptr("too many")}, 400),
			class: job.ClassUserAction, code: "InstanceQuotaExceeded", hintHas: "rds quota", consoleHas: "servicequotas/home/services/rds/quotas?region=eu-west-1",
		},
		"vpc limit": {
			err:   opErr("EC2", "CreateVpc", &smithy.GenericAPIError{Code: "VpcLimitExceeded"}, 400),
			class: job.ClassUserAction, code: "VpcLimitExceeded", consoleHas: "services/ec2",
		},
		"throttling is transient": {
			err:   opErr("Elastic Load Balancing v2", "CreateLoadBalancer", &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}, 400),
			class: job.ClassTransient, code: "Throttling",
		},
		"request limit exceeded is throttling, not a quota": {
			err:   opErr("EC2", "RunInstances", &smithy.GenericAPIError{Code: "RequestLimitExceeded"}, 503),
			class: job.ClassTransient, code: "RequestLimitExceeded",
		},
		"5xx without a code": {
			err:   &smithy.OperationError{ServiceID: "EKS", OperationName: "CreateCluster", Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 502}}, Err: errors.New("bad gateway")}}},
			class: job.ClassTransient, code: "Bad Gateway",
		},
		"not found right after create": {
			err: opErr("EC2", "ModifyVpcAttribute", &smithy.GenericAPIError{Code: "InvalidVpcID.NotFound"}, 400), afterCreate: true,
			class: job.ClassTransient, code: "InvalidVpcID.NotFound",
		},
		"not found otherwise is system": {
			err:   opErr("EC2", "DescribeVpcs", &smithy.GenericAPIError{Code: "InvalidVpcID.NotFound"}, 400),
			class: job.ClassSystem, code: "InvalidVpcID.NotFound",
		},
		"typed ecr not found is system": {
			err:   opErr("ECR", "DescribeRepositories", &ecrtypes.RepositoryNotFoundException{Message: ptr("nope")}, 400),
			class: job.ClassSystem, code: "RepositoryNotFoundException",
		},
		"invalid parameter is system": {
			err:   opErr("EC2", "CreateSubnet", &smithy.GenericAPIError{Code: "InvalidParameterValue"}, 400),
			class: job.ClassSystem, code: "InvalidParameterValue",
		},
		"expired credentials need the user": {
			err:   opErr("STS", "GetCallerIdentity", &smithy.GenericAPIError{Code: "ExpiredToken"}, 403),
			class: job.ClassUserAction, code: "ExpiredToken", hintHas: "credentials",
		},
		"a subnet CIDR conflict after a lost answer is transient, never system": {
			err:   opErr("EC2", "CreateSubnet", &smithy.GenericAPIError{Code: "InvalidSubnet.Conflict", Message: "The CIDR '10.62.48.0/20' conflicts with another subnet"}, 400),
			class: job.ClassTransient, code: "InvalidSubnet.Conflict",
		},
		"a duplicate security group name is transient": {
			err:   opErr("EC2", "CreateSecurityGroup", &smithy.GenericAPIError{Code: "InvalidGroup.Duplicate"}, 400),
			class: job.ClassTransient, code: "InvalidGroup.Duplicate",
		},
		"typed iam entity already exists is transient": {
			err:   opErr("IAM", "CreateRole", &iamtypes.EntityAlreadyExistsException{Message: ptr("exists")}, 409),
			class: job.ClassTransient, code: "EntityAlreadyExists",
		},
		"typed ecr repository already exists is transient": {
			err:   opErr("ECR", "CreateRepository", &ecrtypes.RepositoryAlreadyExistsException{Message: ptr("exists")}, 400),
			class: job.ClassTransient, code: "RepositoryAlreadyExistsException",
		},
		"rds subnet group already exists is transient": {
			err:   opErr("RDS", "CreateDBSubnetGroup", &rdstypes.DBSubnetGroupAlreadyExistsFault{Message: ptr("exists")}, 400),
			class: job.ClassTransient, code: "DBSubnetGroupAlreadyExists",
		},
		"a duplicate load balancer name is transient": {
			err:   opErr("Elastic Load Balancing v2", "CreateLoadBalancer", &smithy.GenericAPIError{Code: "DuplicateLoadBalancerName"}, 400),
			class: job.ClassTransient, code: "DuplicateLoadBalancerName",
		},
		"already classified stays": {
			err:   fault.UserAction(errors.New("x"), "Mine", "do it", ""),
			class: job.ClassUserAction, code: "Mine",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := fault.As(Classify(tc.err, Op{Region: "eu-west-1", AfterCreate: tc.afterCreate}))
			if got.Class != tc.class || got.Code != tc.code {
				t.Fatalf("class, code = %s, %q; want %s, %q", got.Class, got.Code, tc.class, tc.code)
			}
			if !strings.Contains(got.FixHint, tc.hintHas) {
				t.Errorf("fixHint %q lacks %q", got.FixHint, tc.hintHas)
			}
			if !strings.Contains(got.ConsoleURL, tc.consoleHas) {
				t.Errorf("consoleUrl %q lacks %q", got.ConsoleURL, tc.consoleHas)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("classified error does not wrap the original")
			}
		})
	}
}

// TestThrottlingStormIsRiddenOut puts a fault proxy in front of moto that answers 400 Throttling
// to a share of calls; the provider's retryer must get every call through.
func TestThrottlingStormIsRiddenOut(t *testing.T) {
	t.Parallel()
	endpoint := motoEnv.Endpoint(t)
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var calls, throttled atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every second call is throttled, and the first three in a row: a storm, not a blip.
		n := calls.Add(1)
		if n <= 3 || n%2 == 0 {
			throttled.Add(1)
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`<Response><Errors><Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error></Errors><RequestID>x</RequestID></Response>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	ctx := testCtx(t)
	p, err := Open(ctx, Account{AuthMethod: AuthStaticKeys, Region: "sa-east-1", Endpoint: srv.URL,
		AccessKeyID: "testing", SecretAccessKey: "testing"})
	if err != nil {
		t.Fatal(err)
	}
	// A short backoff cap keeps the test quick; the retry count is the production one.
	p.ec2 = ec2.NewFromConfig(p.cfg, func(o *ec2.Options) { o.Retryer = NewRetryer(0, 50_000_000)() })
	tags := testTags(t)
	for i := 0; i < 5; i++ {
		if _, err := p.ensureVPC(ctx, tags.WithRole("vpc"), "10.1.0.0/16"); err != nil {
			t.Fatalf("call %d failed through the storm: %v", i, err)
		}
	}
	if throttled.Load() < 5 {
		t.Fatalf("the proxy throttled only %d calls", throttled.Load())
	}
	out, err := p.ec2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: tags.ec2JobFilter()})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Vpcs) != 1 {
		t.Fatalf("%d VPCs after retried creates, want 1", len(out.Vpcs))
	}
	_, _ = p.ec2.DeleteVpc(context.WithoutCancel(ctx), &ec2.DeleteVpcInput{VpcId: out.Vpcs[0].VpcId})
}
