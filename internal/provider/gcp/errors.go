package gcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/netguard"
)

// reasons of an answer: the google.rpc.ErrorInfo reason of its details (SERVICE_DISABLED,
// IAM_PERMISSION_DENIED), the errors[].reason items of the older REST shape
// (accessNotConfigured, quotaExceeded), and the service the ErrorInfo names.
type reasons struct {
	all     map[string]bool
	service string
}

func reasonsOf(e *googleapi.Error) reasons {
	r := reasons{all: map[string]bool{}}
	for _, it := range e.Errors {
		r.all[it.Reason] = true
	}
	for _, d := range e.Details {
		m, ok := d.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := m["@type"].(string); !strings.HasSuffix(t, "google.rpc.ErrorInfo") {
			continue
		}
		if reason, _ := m["reason"].(string); reason != "" {
			r.all[reason] = true
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			if s, _ := md["service"].(string); s != "" {
				r.service = s
			}
		}
	}
	return r
}

func (r reasons) any(names ...string) bool {
	for _, n := range names {
		if r.all[n] {
			return true
		}
	}
	return false
}

// Classify turns a Google API error into a fault once, here, where Google's codes and
// reasons are understood. An error already classified is returned as is.
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
			"An endpoint of the account is refused by the server's outbound policy; ask the operator to allow it, or remove it from config.endpoints.", "")
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return fault.UserAction(err, "CredentialsInvalid",
			"Google refused the account's credentials; check that the service account key (or refresh token) is current and not revoked.",
			c.ConsoleURL("iam-admin/serviceaccounts"))
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		var ne net.Error
		if errors.As(err, &ne) {
			return fault.Transient(err)
		}
		return fault.System(err)
	}
	r := reasonsOf(ge)
	switch {
	case r.any("SERVICE_DISABLED", "accessNotConfigured"):
		svc := r.service
		if svc == "" {
			svc = "the API"
		}
		return fault.UserAction(err, "ApiNotEnabled",
			fmt.Sprintf("Enable %s in project %s (gcloud services enable %s --project %s), wait a minute, then retry the job.", svc, c.ProjectID, svc, c.ProjectID),
			c.ConsoleURL("apis/library/"+r.service))
	case r.any("BILLING_DISABLED", "billingNotEnabled", "accountDisabled"):
		return fault.UserAction(err, "BillingDisabled",
			"Project "+c.ProjectID+" has no active billing account; link one, then retry the job.",
			c.ConsoleURL("billing/linkedaccount"))
	case r.any("RATE_LIMIT_EXCEEDED", "rateLimitExceeded", "userRateLimitExceeded") || ge.Code == http.StatusTooManyRequests:
		return fault.Transient(err)
	case r.any("QUOTA_EXCEEDED", "quotaExceeded", "limitExceeded", "ZONE_RESOURCE_POOL_EXHAUSTED"):
		return fault.UserAction(err, "QuotaExceeded",
			"A quota of project "+c.ProjectID+" is reached in "+c.Region+"; request an increase or choose a smaller size, then retry the job.",
			c.ConsoleURL("iam-admin/quotas"))
	case ge.Code == http.StatusUnauthorized:
		return fault.UserAction(err, "CredentialsInvalid",
			"Google refused the account's credentials; check that the key is current and not revoked.",
			c.ConsoleURL("iam-admin/serviceaccounts"))
	case ge.Code == http.StatusForbidden:
		return fault.UserAction(err, "PermissionDenied",
			"The account's principal lacks a permission for this call; grant it the roles the job's plan lists (GET the job's plan), then retry the job.",
			c.ConsoleURL("iam-admin/iam"))
	case ge.Code >= 500:
		return fault.Transient(err)
	case ge.Code == http.StatusBadRequest:
		return fault.UserAction(err, "InvalidArgument",
			"Google refused the request as invalid: "+ge.Message+". Correct the job's config, then retry.", "")
	}
	return fault.System(err)
}

// notFound reports whether Google answered that the resource does not exist.
func notFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}

// conflict reports whether Google answered that the name is taken (ALREADY_EXISTS).
func conflict(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusConflict
}
