package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
)

// Discovery lists what a space's account and region have (internal/discovery).
type Discovery interface {
	List(ctx context.Context, orgID, spaceID, kind, cursor string, refresh bool) (discovery.Page, error)
}

// discoveryParams are the query parameters of GET /api/spaces/{id}/discovery/{kind}.
type discoveryParams struct {
	Refresh bool   `query:"refresh" description:"ask the cloud again instead of the short-lived cache"`
	Cursor  string `query:"cursor" description:"nextCursor of the previous page"`
}

func (s *Server) discover(w http.ResponseWriter, r *http.Request, p *Principal) error {
	sp, err := s.cfg.Store.GetSpace(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return storeErr(err, "space")
	}
	q := r.URL.Query()
	refresh := false
	if v := q.Get("refresh"); v != "" {
		if refresh, err = strconv.ParseBool(v); err != nil {
			return badRequest("bad refresh", FieldError{Field: "refresh", Rule: "type", Message: "must be true or false"})
		}
	}
	if s.cfg.Discovery == nil {
		return problem(http.StatusNotFound, "discovery is not configured on this server")
	}
	page, err := s.cfg.Discovery.List(r.Context(), p.OrgID, sp.ID, r.PathValue("kind"), q.Get("cursor"), refresh)
	switch {
	case errors.Is(err, discovery.ErrUnknownKind):
		return badRequest("unknown discovery kind", FieldError{Field: "kind", Rule: "enum", Message: "must be one of " + strings.Join(discovery.Kinds, ", ")})
	case errors.Is(err, discovery.ErrBadCursor):
		return badRequest("bad cursor", FieldError{Field: "cursor", Rule: "format", Message: "is not a cursor this listing gave"})
	case errors.Is(err, discovery.ErrUnsupported):
		return badRequest("discovery is not available for this space", FieldError{Field: "id", Rule: "provider", Message: err.Error()})
	case err != nil:
		return cloudProblem(err)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// cloudProblem answers a listing the cloud refused (credentials, permissions: 422 with the
// fix) or did not answer (503); anything unclassified is ours.
func cloudProblem(err error) error { return cloudRefusal(err, "listing") }

// cloudRefusal answers a cloud read (what names it) the cloud refused (422 with the fix) or
// did not answer (503); anything unclassified is ours.
func cloudRefusal(err error, what string) error {
	fe := fault.As(err)
	if fe == nil {
		return err
	}
	var pr *Problem
	switch fe.Class {
	case job.ClassUserAction:
		pr = problem(http.StatusUnprocessableEntity, "the cloud refused the "+what+": "+err.Error())
	case job.ClassTransient:
		pr = problem(http.StatusServiceUnavailable, "the cloud did not answer the "+what+"; try again: "+err.Error())
	default:
		return err
	}
	pr.FixHint = fe.FixHint
	return pr
}
