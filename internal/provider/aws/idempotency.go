package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/acm"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/route53"
)

// clientToken is the idempotency key of one create: derived from the org, job, step and the
// resource's role only, so the SDK's own retries and the engine's re-runs of the step send the
// same key and the cloud answers a repeat with what the first attempt made. 35 characters fit
// every AWS token field (EC2 allows 64, EKS and Secrets Manager 32-64).
func clientToken(step string, t Tags) string {
	sum := sha256.Sum256([]byte(t.OrgID + "\x00" + t.JobID + "\x00" + step + "\x00" + t.Role))
	return "gw-" + hex.EncodeToString(sum[:16])
}

// Per-call options that switch the SDK's retryer off for a create with no idempotency key the
// cloud honours: createOnce retries it instead, looking first.
func ec2NoRetry(o *ec2.Options)         { o.Retryer = aws.NopRetryer{} }
func acmNoRetry(o *acm.Options)         { o.Retryer = aws.NopRetryer{} }
func r53NoRetry(o *route53.Options)     { o.Retryer = aws.NopRetryer{} }
func elbNoRetry(o *elbv2.Options)       { o.Retryer = aws.NopRetryer{} }
func asgNoRetry(o *autoscaling.Options) { o.Retryer = aws.NopRetryer{} }

// createOnce makes a resource whose create call a blind retry could repeat: when the answer of
// an attempt is lost (connection reset, timeout, 5xx after the cloud acted) the SDK would send
// the create again and make a second VPC, Elastic IP or gateway, or meet the first one as a
// conflict. create must therefore be called with the SDK's retryer off; createOnce retries it
// on the client's own retry rules (r: throttling, 5xx, connection errors, same backoff and
// attempts), but before every further attempt whose outcome is unknown find looks it up by this job's tags or deterministic name and
// adopts what the lost attempt made. A conflict ("already exists", a CIDR taken) is answered
// the same way: find, and adopt when it is this job's. Anything else is returned unclassified
// for the caller to classify (or to name the stranger's resource).
func createOnce[T any](ctx context.Context, r aws.Retryer, find func(context.Context) (T, bool, error), create func(context.Context) (T, error)) (T, error) {
	var zero T
	throttled := retry.IsErrorThrottles(retry.DefaultThrottles)
	for attempt := 1; ; attempt++ {
		v, err := create(ctx)
		if err == nil {
			return v, nil
		}
		if isConflict(err) {
			got, found, ferr := find(ctx)
			if ferr != nil {
				return zero, ferr
			}
			if found {
				return got, nil
			}
			return zero, err
		}
		if !r.IsErrorRetryable(err) || attempt >= r.MaxAttempts() {
			return zero, err
		}
		d, berr := r.RetryDelay(attempt, err)
		if berr != nil {
			return zero, err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, ctx.Err()
		case <-t.C:
		}
		if throttled.IsErrorThrottle(err).Bool() {
			continue // refused, not acted on: nothing to look for
		}
		got, found, ferr := find(ctx)
		if ferr != nil {
			return zero, ferr
		}
		if found {
			return got, nil
		}
	}
}

// conflictCodes mean "what you asked to create is there already" (or a CIDR, name or
// association it needs is taken). After a lost answer that is usually the job's own earlier
// attempt, which a look-up adopts; only a look-up can tell, so they are never system errors.
var conflictCodes = map[string]bool{
	"EntityAlreadyExists": true, "ResourceExistsException": true, "ResourceInUseException": true,
	"RouteAlreadyExists": true, "HostedZoneAlreadyExists": true, "Resource.AlreadyAssociated": true,
	"AlreadyExists": true, "AlreadyExistsException": true, "IdempotentParameterMismatch": false,
}

// isConflict reports an AWS "already exists" or conflict answer.
func isConflict(err error) bool {
	code := apiCode(err)
	return isConflictCode(code)
}

func isConflictCode(code string) bool {
	if code == "" {
		return false
	}
	if v, ok := conflictCodes[code]; ok {
		return v
	}
	return strings.HasSuffix(code, ".Conflict") || strings.HasSuffix(code, ".Duplicate") ||
		strings.Contains(code, "AlreadyExists") || strings.HasPrefix(code, "Duplicate")
}

// gone reports a "not found" answer to a delete: a repeat after a lost answer finds the
// resource its first attempt removed, which is the success it was after.
func gone(err error) bool { return isNotFound(apiCode(err)) }
