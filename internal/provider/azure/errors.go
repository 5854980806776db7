package azure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// deniedCodes are Azure's answers to a principal that lacks a role or a valid token.
var deniedCodes = map[string]bool{
	"AuthorizationFailed": true, "LinkedAuthorizationFailed": true, "AuthenticationFailed": true,
	"InvalidAuthenticationToken": true, "InvalidAuthenticationTokenTenant": true, "Forbidden": true,
	"RequestDisallowedByPolicy": true,
}

// registrationCodes mean the subscription has not registered the resource provider.
var registrationCodes = map[string]bool{
	"SubscriptionNotRegistered": true, "MissingSubscriptionRegistration": true, "NoRegisteredProviderFound": true,
}

// quotaCodes mean a subscription limit is reached.
var quotaCodes = map[string]bool{
	"QuotaExceeded": true, "OperationNotAllowed": true, "SkuNotAvailable": true,
	"PublicIPCountLimitReached": true, "NetworkQuotaExceeded": true, "ResourceQuotaExceeded": true,
}

// transientCodes pass on their own: another operation holds the resource, or Azure is busy.
var transientCodes = map[string]bool{
	"TooManyRequests": true, "AnotherOperationInProgress": true, "RetryableError": true,
	"OperationPreempted": true, "InternalServerError": true, "ServiceUnavailable": true,
	"InUseSubnetCannotBeDeleted": true, "ReferencedResourceNotProvisioned": true, "Canceled": true,
}

var namespaceInMessage = regexp.MustCompile(`(?i)namespace '?(Microsoft\.[A-Za-z]+)'?`)

// Classify turns an Azure SDK error into a fault once, here, where Azure's codes are
// understood. An error already classified is returned as is.
func (c *Client) Classify(err error) error {
	if err == nil {
		return nil
	}
	var already *fault.Error
	if errors.As(err, &already) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fault.Transient(err)
	}
	if errors.Is(err, netguard.ErrRefused) {
		return fault.UserAction(err, "OutboundRefused",
			"The account's endpoint is refused by the server's outbound policy; ask the operator to allow it, or remove config.endpoint.", "")
	}
	var authErr *azidentity.AuthenticationFailedError
	if errors.As(err, &authErr) {
		return fault.UserAction(err, "CredentialsInvalid",
			"Azure refused the account's credentials; check tenantId, clientId and the secret, and that the secret has not expired.",
			c.portal("/blade/Microsoft_AAD_RegisteredApps/ApplicationsListBlade"))
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		var ne net.Error
		if errors.As(err, &ne) {
			return fault.Transient(err)
		}
		return fault.System(err)
	}
	code := re.ErrorCode
	switch {
	case deniedCodes[code] || re.StatusCode == http.StatusForbidden:
		return fault.UserAction(err, orCode(code, "AuthorizationFailed"),
			"The account's principal lacks a role for this call; assign it Contributor on the subscription (or the resource group), then retry the job.",
			c.PortalURL("")+"/users")
	case registrationCodes[code]:
		ns := "the resource provider"
		if m := namespaceInMessage.FindStringSubmatch(err.Error()); m != nil {
			ns = m[1]
		}
		return fault.UserAction(err, code,
			fmt.Sprintf("Register %s on the subscription: az provider register --namespace %s --subscription %s, then retry the job.", ns, ns, c.SubscriptionID),
			c.PortalURL("")+"/resourceProviders")
	case quotaCodes[code] || strings.Contains(code, "Quota"):
		return fault.UserAction(err, code,
			"A subscription quota is reached in "+c.Location+"; request an increase (Usage + quotas) or choose a smaller size, then retry the job.",
			c.PortalURL("")+"/usagesAndQuota")
	case transientCodes[code] || re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500:
		return fault.Transient(err)
	}
	return fault.System(err)
}

func orCode(code, dflt string) string {
	if code == "" {
		return dflt
	}
	return code
}

func (c *Client) portal(path string) string { return "https://portal.azure.com/#" + path }

// notFound reports whether Azure answered that the resource (or its group) does not exist.
func notFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}
