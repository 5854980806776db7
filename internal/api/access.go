package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/groundworkhq/groundwork/internal/audit"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Can reports whether p holds policy org-wide or at one of scopes (the chain of scopes the
// object sits in). A principal without permissions (a static token) may do everything in its org.
func (p *Principal) Can(policy string, scopes ...string) bool {
	return p.Perms == nil || p.Perms.Allows(policy, scopes...)
}

// Permitted is the default Authorizer: it lets a principal reach a route when it holds the
// route's policy at some scope; the object itself is checked next (see authorizeObject).
type Permitted struct{}

func (Permitted) Authorize(_ context.Context, p *Principal, policy string) error {
	if p.Perms == nil || p.Perms.Any(policy) {
		return nil
	}
	return errors.New("missing " + policy)
}

// authorizeObject checks a route's {id} against a principal whose grant of the policy is
// narrower than the org. The object is looked up in the caller's org first, so another org's
// id answers 404 whatever the caller holds, and ids leak nothing.
func (s *Server) authorizeObject(r *http.Request, p *Principal, policy string) error {
	id := r.PathValue("id")
	if p.Perms == nil || p.Perms.OrgWide(policy) {
		return nil
	}
	if id == "" {
		// A route on a collection with a grant narrower than the org: only the handlers that
		// filter their answer, or check the parent named in the body, may serve it.
		if scopedCollections[r.Pattern] {
			return nil
		}
		return problem(http.StatusForbidden, "this needs the "+policy+" permission across the organisation; yours is limited to some resources")
	}
	res, _ := rbac.Split(policy)
	chain, err := newScopes(s.cfg.Store, p.OrgID).of(r.Context(), res, id)
	if err != nil {
		return storeErr(err, res)
	}
	if !p.Perms.Allows(policy, chain...) {
		return problem(http.StatusForbidden, "this needs the "+policy+" permission on "+res+" "+id)
	}
	return nil
}

// scopedCollections are the collection routes whose handlers honour narrower grants: the lists
// that show only what may be viewed, job creation, which checks the space in the body, and
// the catalog.
var scopedCollections = map[string]bool{
	"GET /api/spaces":             true,
	"GET /api/cloud-accounts":     true,
	"GET /api/provisioning-jobs":  true,
	"POST /api/provisioning-jobs": true,
	// The remediation list filters what may be viewed; create checks the space in its body.
	"GET /api/remediation-jobs":  true,
	"POST /api/remediation-jobs": true,
	// The catalog is the same for everyone: whoever may view it anywhere may read it.
	"GET /api/catalog/types":                   true,
	"GET /api/catalog/types/{category}/{type}": true,
	"GET /api/catalog/components":              true,
	// install-component checks service:create on the space named in its body.
	"POST /api/provisioning-jobs/install-component": true,
}

// scopes resolves the chain of scopes an object sits in: itself, its space, the teams that own
// that space. Teams are read once per request.
type scopes struct {
	st    store.Store
	org   string
	teams []*store.Team
}

func newScopes(st store.Store, org string) *scopes { return &scopes{st: st, org: org} }

func (sc *scopes) of(ctx context.Context, res, id string) ([]string, error) {
	switch res {
	case "space":
		if _, err := sc.st.GetSpace(ctx, sc.org, id); err != nil {
			return nil, err
		}
		return sc.space(ctx, id)
	case "provisioning", "remediation":
		j, err := sc.st.GetJob(ctx, &store.GetJobParams{OrgID: sc.org, ID: id})
		if err != nil {
			return nil, err
		}
		chain, err := sc.space(ctx, j.SpaceID)
		return append([]string{res + ":" + id}, chain...), err
	case "cloud-account":
		if _, err := sc.st.GetCloudAccount(ctx, sc.org, id); err != nil {
			return nil, err
		}
	case "team":
		if _, err := sc.st.GetTeam(ctx, sc.org, id); err != nil {
			return nil, err
		}
		return []string{"team:" + id}, nil
	}
	return []string{res + ":" + id}, nil
}

// space returns the scopes of a space: itself and the teams owning it.
func (sc *scopes) space(ctx context.Context, spaceID string) ([]string, error) {
	if sc.teams == nil {
		ts, err := sc.st.ListTeams(ctx, sc.org)
		if err != nil {
			return nil, err
		}
		sc.teams = ts
	}
	out := []string{"space:" + spaceID}
	for _, t := range sc.teams {
		for _, id := range t.SpaceIDs {
			if id == spaceID {
				out = append(out, "team:"+t.ID)
			}
		}
	}
	return out, nil
}

// audited runs fn in one transaction with e, filled with the caller as actor and the time.
func (s *Server) audited(ctx context.Context, p *Principal, e *audit.Entry, fn func(tx store.Tx) error) error {
	e.OrgID, e.Actor, e.CreatedAt = p.OrgID, p.Actor, s.cfg.Now()
	return s.cfg.Store.Audited(ctx, e, fn)
}

// errNoChange rolls an audited transaction back when the request turned out to change nothing
// (cancelling a job that already ended): only mutations are on the record.
var errNoChange = errors.New("no change")

func entry(scope, action, resourceType, resourceID string, meta any) *audit.Entry {
	return audit.New("", scope, action, "", resourceType, resourceID, meta)
}
