package gcp

import (
	"context"
	"net/http"
	"strings"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// computeService is Compute Engine opened with the account, once per client: every step of
// four families calls it, and the service (safe for concurrent use) holds nothing of a call.
func (c *Client) computeService(ctx context.Context) (*compute.Service, error) {
	c.computeOnce.Do(func() {
		c.compute, c.computeErr = compute.NewService(context.WithoutCancel(ctx), c.Options(ServiceCompute)...)
	})
	if c.computeErr != nil {
		return nil, fault.System(c.computeErr)
	}
	return c.compute, nil
}

// computeOpName is how a compute operation is recorded in Ops: its scope and name
// ("global/operation-1", "regions/europe-west1/operation-2"), which is what reading it
// back needs.
func computeOpName(op *compute.Operation) string {
	if op == nil || op.Status == "DONE" && op.Error == nil {
		return ""
	}
	last := func(link string) string { return link[strings.LastIndex(link, "/")+1:] }
	switch {
	case op.Zone != "":
		return "zones/" + last(op.Zone) + "/" + op.Name
	case op.Region != "":
		return "regions/" + last(op.Region) + "/" + op.Name
	}
	return "global/" + op.Name
}

// startCompute is a compute insert or delete call's answer as Resource.Create and Delete
// return it.
func startCompute(op *compute.Operation, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if op.Status == "DONE" && op.Error != nil {
		return "", computeOpError(op)
	}
	return computeOpName(op), nil
}

// pollCompute reads a compute operation recorded by computeOpName once.
func (c *Client) pollCompute(s *compute.Service) func(ctx context.Context, name string) (bool, error, error) {
	return func(ctx context.Context, name string) (bool, error, error) {
		parts := strings.Split(name, "/")
		var op *compute.Operation
		var err error
		switch {
		case len(parts) == 3 && parts[0] == "zones":
			op, err = s.ZoneOperations.Get(c.ProjectID, parts[1], parts[2]).Context(ctx).Do()
		case len(parts) == 3 && parts[0] == "regions":
			op, err = s.RegionOperations.Get(c.ProjectID, parts[1], parts[2]).Context(ctx).Do()
		case len(parts) == 2 && parts[0] == "global":
			op, err = s.GlobalOperations.Get(c.ProjectID, parts[1]).Context(ctx).Do()
		default:
			// A name this build cannot read: forget it and read the resource instead.
			return false, nil, &googleapi.Error{Code: http.StatusNotFound, Message: "unreadable operation " + name}
		}
		if err != nil {
			return false, nil, err
		}
		if op.Status != "DONE" {
			return false, nil, nil
		}
		if op.Error != nil {
			return true, computeOpError(op), nil
		}
		return true, nil, nil
	}
}

// computeOpError is a failed compute operation as the error its call would have answered:
// the HTTP status it names and its error codes as reasons (QUOTA_EXCEEDED,
// RESOURCE_IN_USE_BY_ANOTHER_RESOURCE).
func computeOpError(op *compute.Operation) error {
	e := &googleapi.Error{Code: int(op.HttpErrorStatusCode), Message: op.HttpErrorMessage}
	if e.Code == 0 {
		e.Code = http.StatusBadRequest
	}
	if op.Error != nil {
		for _, it := range op.Error.Errors {
			e.Errors = append(e.Errors, googleapi.ErrorItem{Reason: it.Code, Message: it.Message})
			if e.Message == "" || e.Message == http.StatusText(e.Code) {
				e.Message = it.Message
			}
		}
	}
	return e
}
