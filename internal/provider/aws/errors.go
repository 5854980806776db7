package aws

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// CodeOutboundRefused is the code of a call whose endpoint the outbound policy refused.
const CodeOutboundRefused = "OutboundRefused"

// Op tells Classify what was being done, so that a hint can name the permission and a "not
// found" can be told apart from eventual consistency.
type Op struct {
	// Region goes into console links.
	Region string
	// AfterCreate is set when the call looks up something this job has just created: AWS's
	// eventual consistency then makes "not found" a reason to wait, not to fail.
	AfterCreate bool
}

// throttleCodes are the AWS error codes that mean "slow down".
var throttleCodes = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true,
	"RequestLimitExceeded": true, "RequestThrottled": true, "RequestThrottledException": true,
	"TooManyRequestsException": true, "SlowDown": true, "ProvisionedThroughputExceededException": true,
	"PriorRequestNotComplete": true, "BandwidthLimitExceeded": true, "EC2ThrottledException": true,
	"TransactionInProgressException": true, "RequestExpired": false,
}

// transientCodes are server-side or capacity conditions that pass on their own.
var transientCodes = map[string]bool{
	"InternalError": true, "InternalFailure": true, "InternalServerError": true, "ServiceUnavailable": true,
	"ServiceUnavailableException": true, "InsufficientInstanceCapacity": true, "InsufficientCapacity": true,
	"Unavailable": true, "IDPCommunicationError": true, "ConcurrentModificationException": true,
	"OperationAborted": true, "IncorrectState": true, "DependencyViolation": true,
	"InvalidDBInstanceState": true, "InvalidCacheClusterState": true, "ResourceInUseException": true,
	"DBSubnetGroupQuotaExceeded": false,
}

// deniedCodes mean the credentials lack a permission or are not valid.
var deniedCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "UnauthorizedOperation": true,
	"UnauthorizedAccess": true, "AuthFailure": true, "InvalidClientTokenId": true,
	"UnrecognizedClientException": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"ExpiredTokenException": true, "OptInRequired": true, "Blocked": true,
}

// quotaSuffixes mark account quota errors (VpcLimitExceeded, DBInstanceQuotaExceeded, ...).
var quotaSuffixes = []string{"LimitExceeded", "LimitExceededException", "QuotaExceeded", "QuotaExceededException", "QuotaExceededFault"}

var permissionInMessage = regexp.MustCompile(`perform:? ([a-z0-9-]+:[A-Za-z0-9*]+)`)

// Classify turns an SDK error into a fault.Error once, here, where AWS's codes are understood.
// An error that is already classified is returned as is.
func Classify(err error, op Op) error {
	if err == nil {
		return nil
	}
	var already *fault.Error
	if errors.As(err, &already) {
		return err
	}
	code, msg := "", err.Error()
	var api smithy.APIError
	if errors.As(err, &api) {
		code, msg = api.ErrorCode(), api.ErrorMessage()
	}
	service, operation := "", ""
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		service, operation = oe.ServiceID, oe.OperationName
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return fault.UserAction(err, CodeOutboundRefused,
			"The cloud account's endpoint is refused by Groundwork's outbound policy (link-local and metadata addresses, or outside --outbound-allow): set config.endpoint to an allowed address.", "")
	case throttleCodes[code]:
		return withCode(fault.Transient(err), code)
	case deniedCodes[code]:
		perm := permissionFor(msg, service, operation)
		hint := fmt.Sprintf("Grant %s to the cloud account's IAM identity (or fix its credentials), then retry.", perm)
		if strings.HasPrefix(code, "Expired") || code == "InvalidClientTokenId" || code == "SignatureDoesNotMatch" || code == "AuthFailure" || code == "UnrecognizedClientException" {
			hint = "The cloud account's AWS credentials are invalid or expired: update them, then retry."
		}
		if code == "OptInRequired" {
			hint = fmt.Sprintf("Subscribe the AWS account to %s (opt-in required), then retry.", strings.ToLower(service))
		}
		return fault.UserAction(err, code, hint, iamConsoleURL(perm))
	case isQuota(code):
		svc := iamPrefix(service)
		hint := fmt.Sprintf("The AWS account reached a %s quota (%s): request an increase in Service Quotas or free capacity, then retry.", svc, code)
		return fault.UserAction(err, code, hint, quotaConsoleURL(svc, op.Region))
	case transientCodes[code]:
		return withCode(fault.Transient(err), code)
	case isConflictCode(code):
		// Most often the job's own earlier attempt whose answer was lost: the step's re-run
		// looks it up by tag or name and adopts it. A stranger's resource is named as a
		// user_action by the driver that finds it, never here, where nobody has looked.
		return withCode(fault.Transient(err), code)
	case op.AfterCreate && isNotFound(code):
		return withCode(fault.Transient(err), code)
	case status >= 500 || status == http.StatusTooManyRequests:
		return withCode(fault.Transient(err), firstNonEmpty(code, http.StatusText(status)))
	case code == "" && isRetryableTransport(err):
		return withCode(fault.Transient(err), "Network")
	}
	return withCode(fault.System(err), code)
}

// apiCode is the AWS error code of err, or "".
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func withCode(err error, code string) error {
	var fe *fault.Error
	if errors.As(err, &fe) && code != "" {
		fe.Code = code
	}
	return err
}

func isQuota(code string) bool {
	if code == "RequestLimitExceeded" || code == "" {
		return false
	}
	for _, s := range quotaSuffixes {
		if strings.HasSuffix(code, s) {
			return true
		}
	}
	return false
}

func isNotFound(code string) bool {
	return strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, "NotFound") ||
		strings.HasSuffix(code, "NotFoundException") || strings.HasSuffix(code, "NotFoundFault") ||
		strings.HasPrefix(code, "NoSuch") || code == "ResourceNotFoundException"
}

// isRetryableTransport reports a connection-level failure (reset, refused, timeout) that the
// SDK's retryer itself treats as retryable.
func isRetryableTransport(err error) bool {
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool()
}

// permissionFor names the IAM action to grant: from AWS's message when it says, else from the
// operation that failed.
func permissionFor(msg, service, operation string) string {
	if m := permissionInMessage.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	if operation == "" {
		return "the required permission"
	}
	return iamPrefix(service) + ":" + operation
}

// iamPrefix maps an SDK service ID to its IAM action prefix.
func iamPrefix(serviceID string) string {
	switch serviceID {
	case "Elastic Load Balancing v2", "Elastic Load Balancing":
		return "elasticloadbalancing"
	case "Auto Scaling":
		return "autoscaling"
	case "Secrets Manager":
		return "secretsmanager"
	case "Route 53":
		return "route53"
	case "":
		return "aws"
	}
	return strings.ToLower(strings.ReplaceAll(serviceID, " ", ""))
}

func iamConsoleURL(permission string) string {
	return "https://console.aws.amazon.com/iam/home#/policies$new?step=edit&action=" + permission
}

func quotaConsoleURL(service, region string) string {
	u := "https://console.aws.amazon.com/servicequotas/home/services/" + service + "/quotas"
	if region != "" {
		u += "?region=" + region
	}
	return u
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
