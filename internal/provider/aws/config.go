// Package aws is the AWS provider: drivers for every resource family on aws-sdk-go-v2. Each
// driver is idempotent (ClientToken where EC2 accepts one, else a lookup by tag or deterministic
// name before a create), tags what it creates with the job's tag set, and returns errors already
// classified with package fault.
package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws"
	"go.opentelemetry.io/otel/trace"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// AuthMethod is how a cloud account authenticates.
type AuthMethod string

const (
	// AuthDefault uses the SDK's default chain (env, shared config, web identity, IMDS).
	AuthDefault AuthMethod = "default"
	// AuthStaticKeys uses an access key pair resolved from the account's secret references.
	AuthStaticKeys AuthMethod = "static_keys"
	// AuthTemporary is static keys plus a session token.
	AuthTemporary AuthMethod = "temporary_credentials"
	// AuthAssumeRole assumes RoleARN through STS, starting from the default chain or static keys.
	AuthAssumeRole AuthMethod = "assume_role"
)

// Account is what the provider needs of a cloud account. Secret values arrive already resolved
// from their references: this package never reads the secret store.
type Account struct {
	AuthMethod      AuthMethod
	Region          string
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	RoleARN         string
	ExternalID      string
	// Endpoint overrides every service's endpoint (moto, LocalStack, a VPC endpoint). Empty
	// means AWS_ENDPOINT_URL, if set, else the real AWS endpoints.
	Endpoint string
	// Outbound, if set, is the address policy a user-given Endpoint is dialled through: every
	// connection to it is checked after name resolution (no proxy). nil means no policy (tests
	// that open a provider directly); the server always sets it.
	Outbound *netguard.Policy
	// MaxAttempts bounds the retryer; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Tracer, if set, makes a span per AWS API call (otelaws), under the span of the context
	// the call is made with: a job step's.
	Tracer trace.TracerProvider
}

// DefaultMaxAttempts is enough to ride out a throttling storm (the SDK default of 3 is not):
// with capped exponential backoff and jitter the attempts spread over about a minute.
const DefaultMaxAttempts = 12

// DefaultMaxBackoff caps one retry delay.
const DefaultMaxBackoff = 20 * time.Second

// NewRetryer returns the retryer every client uses: standard retry rules (throttling, 5xx,
// connection errors) with more attempts, a longer backoff cap, and no client-side rate-limit
// bucket, whose quota would otherwise turn a storm of throttles into local "retry quota
// exceeded" failures before the cloud recovers.
func NewRetryer(maxAttempts int, maxBackoff time.Duration) func() aws.Retryer {
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	return func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxAttempts
			o.MaxBackoff = maxBackoff
			o.RateLimiter = noRateLimit{}
			// A dial the outbound policy refused is refused again on every attempt.
			o.Retryables = append([]retry.IsErrorRetryable{refusedNotRetryable}, o.Retryables...)
		})
	}
}

var refusedNotRetryable = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	if errors.Is(err, netguard.ErrRefused) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
})

type noRateLimit struct{}

func (noRateLimit) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (noRateLimit) AddTokens(uint) error { return nil }

// Validate reports a field-level problem with the account.
func (a Account) Validate() error {
	if a.Region == "" {
		return errors.New("region: required")
	}
	switch a.method() {
	case AuthDefault:
	case AuthStaticKeys, AuthTemporary:
		if a.AccessKeyID == "" || a.SecretAccessKey == "" {
			return fmt.Errorf("accessKeyID, secretAccessKey: required for authMethod %s", a.method())
		}
	case AuthAssumeRole:
		if a.RoleARN == "" {
			return errors.New("roleARN: required for authMethod assume_role")
		}
	default:
		return fmt.Errorf("authMethod: unknown %q", a.AuthMethod)
	}
	return nil
}

func (a Account) method() AuthMethod {
	if a.AuthMethod == "" {
		return AuthDefault
	}
	return a.AuthMethod
}

// LoadConfig builds the SDK configuration for an account.
func LoadConfig(ctx context.Context, a Account) (aws.Config, error) {
	if err := a.Validate(); err != nil {
		return aws.Config{}, fault.UserAction(err, "InvalidCloudAccount", "Fix the cloud account's settings: "+err.Error(), "")
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(a.Region),
		config.WithRetryer(NewRetryer(a.MaxAttempts, 0)),
	}
	endpoint := a.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
	}
	if a.Endpoint != "" && a.Outbound != nil {
		// The account's endpoint is user-given: it is dialled through the outbound policy, never
		// through a proxy (which would connect past the check). TLS settings stay the SDK's.
		policy := a.Outbound
		opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.DialContext = policy.DialContext
			tr.Proxy = nil
		})))
	}
	if a.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(a.AccessKeyID, a.SecretAccessKey, a.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fault.System(fmt.Errorf("load aws config: %w", err))
	}
	if a.Tracer != nil {
		otelaws.AppendMiddlewares(&cfg.APIOptions, otelaws.WithTracerProvider(a.Tracer))
	}
	if a.method() == AuthAssumeRole {
		stsClient := sts.NewFromConfig(cfg)
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsClient, a.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = "groundwork"
			if a.ExternalID != "" {
				o.ExternalID = aws.String(a.ExternalID)
			}
		}))
	}
	return cfg, nil
}
