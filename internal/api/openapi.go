package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go"
	"github.com/swaggest/openapi-go/openapi31"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/catalog/components"
	"github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/discovery"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
	"github.com/groundworkhq/groundwork/internal/protocol"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/store"
)

// The OpenAPI document is built from the route table and the Go types the handlers read and
// write, so it cannot drift from them: a route without an opDoc fails TestEveryRouteHasADoc,
// and a type change changes the schema with it.

// opDoc describes one route for the OpenAPI document.
type opDoc struct {
	summary string
	// params is a struct whose query/header tags name the operation's parameters (path
	// parameters come from the route's pattern).
	params any
	// body is the JSON request body's type; nil: the operation takes none.
	body         any
	bodyOptional bool
	// ok maps each success status to its JSON body's type (nil: no content).
	ok map[int]any
	// problems lists the problem statuses the operation answers beyond the ones every route
	// has (401, 403, 500; 400 and 404 when it has input or path parameters).
	problems []int
	// contents are extra media types of the 200 answer (the audit export).
	contents []string
	// stream marks the server-sent events route.
	stream bool
}

// Answer envelopes: every list is {"data": [...]}, some with a cursor or page.
type (
	spaceList struct {
		Data []*store.Space `json:"data"`
	}
	accountList struct {
		Data []*store.CloudAccount `json:"data"`
	}
	tokenList struct {
		Data []*store.Token `json:"data"`
	}
	roleList struct {
		Data []*rbac.Role `json:"data"`
	}
	assignmentList struct {
		Data []*rbac.Assignment `json:"data"`
	}
	userList struct {
		Data []*store.User `json:"data"`
	}
	teamList struct {
		Data []*store.Team `json:"data"`
	}
	typeList struct {
		Data []catalog.Type `json:"data"`
	}
	componentList struct {
		Data []components.Summary `json:"data"`
	}
	policyList struct {
		Data      []rbac.Policy   `json:"data"`
		Resources []rbac.Resource `json:"resources"`
	}
)

// Query and header parameters.
type (
	listJobsParams struct {
		Status  string `query:"status" minLength:"1" description:"only jobs in this status"`
		Kind    string `query:"kind" minLength:"1" description:"only jobs of this kind (family)"`
		SpaceID string `query:"spaceID" minLength:"1" description:"only jobs in this space"`
		Cursor  string `query:"cursor" description:"nextCursor of the previous page"`
		Limit   int    `query:"limit" minimum:"1" maximum:"500" description:"page size (default 50)"`
	}
	byEmailParams struct {
		Email string `query:"email" minLength:"1" description:"only those of this user"`
	}
	auditParams struct {
		Action       string `query:"action" minLength:"1"`
		Actor        string `query:"actor" minLength:"1"`
		ResourceType string `query:"resourceType" minLength:"1"`
		ResourceID   string `query:"resourceID" minLength:"1"`
		Scope        string `query:"scope" minLength:"1" description:"comma-separated audit scopes"`
		From         string `query:"from" minLength:"1" description:"RFC 3339 time; entries at or after it"`
		To           string `query:"to" minLength:"1" description:"RFC 3339 time; entries before it"`
		Page         int    `query:"page" minimum:"1"`
		Limit        int    `query:"limit" minimum:"1" maximum:"200"`
		Format       string `query:"format" enum:"json,csv,ndjson" description:"csv and ndjson export every match, not one page"`
	}
	patchJobParams struct {
		IfMatch string `header:"If-Match" description:"the version read, as an ETag; or send version in the body; neither applies the change to the job as it is"`
	}
)

// openapiPath is where the document is served.
const openapiPath = "/api/openapi.json"

func (s *Server) docs() map[string]opDoc {
	ok := func(status int, v any) map[int]any { return map[int]any{status: v} }
	noContent := ok(http.StatusNoContent, nil)
	c := http.StatusConflict
	d := map[string]opDoc{
		"GET /api/spaces":              {summary: "List the spaces of your organisation", ok: ok(200, spaceList{})},
		"POST /api/spaces":             {summary: "Create a space", body: createSpaceRequest{}, ok: ok(201, store.Space{})},
		"GET /api/spaces/{id}":         {summary: "Read a space", ok: ok(200, store.Space{})},
		"DELETE /api/spaces/{id}":      {summary: "Delete a space that holds no jobs", ok: noContent, problems: []int{c}},
		"GET /api/cloud-accounts":      {summary: "List cloud accounts", ok: ok(200, accountList{})},
		"POST /api/cloud-accounts":     {summary: "Register a cloud account", body: createAccountRequest{}, ok: ok(201, store.CloudAccount{}), problems: []int{c}},
		"GET /api/cloud-accounts/{id}": {summary: "Read a cloud account", ok: ok(200, store.CloudAccount{})},
		"PATCH /api/cloud-accounts/{id}": {summary: "Rename a cloud account or change its permission level", body: patchAccountRequest{},
			ok: ok(200, store.CloudAccount{}), problems: []int{c}},
		"DELETE /api/cloud-accounts/{id}":                                          {summary: "Delete a cloud account no space uses", ok: noContent, problems: []int{c}},
		"GET /api/cloud-accounts/{id}/upgrade-policy":                              {summary: "The IAM policy a read-only account needs to provision", ok: ok(200, UpgradePolicy{})},
		"GET /api/provisioning-jobs":                                               {summary: "List jobs, newest first, a page at a time (cursor)", params: listJobsParams{}, ok: ok(200, jobList{})},
		"POST /api/provisioning-jobs":                                              {summary: "Create a provisioning job", body: createJobRequest{}, ok: ok(201, job.Job{}), problems: []int{c}},
		"GET /api/spaces/{id}/discovery/{kind}":                                    {summary: "List what the space's account and region have: networks, subnets, dns-zones, clusters, instance-types or versions, a page at a time", params: discoveryParams{}, ok: ok(200, discovery.Page{}), problems: []int{http.StatusUnprocessableEntity, http.StatusServiceUnavailable}},
		"GET /api/provisioning-jobs/{id}/plan":                                     {summary: "The plan of a stored job (a draft under review): steps, resources, cloud operations, policy, monthly cost", ok: ok(200, plan.Plan{})},
		"POST /api/provisioning-jobs/plan":                                         {summary: "Plan a job without creating it: steps, resources, cloud operations, least-privilege policy, monthly cost", body: createJobRequest{}, ok: ok(200, plan.Plan{})},
		"GET /api/provisioning-jobs/{id}":                                          {summary: "Read a job", ok: ok(200, job.Job{})},
		"PATCH /api/provisioning-jobs/{id}":                                        {summary: "Rename, retag, promote a draft, run a VM operation, resize, or update a live job's config (config: recorded as a revision and carried out as pipeline steps)", params: patchJobParams{}, body: patchJobRequest{}, ok: map[int]any{200: job.Job{}, 202: pendingJob{}}, problems: []int{c}},
		"DELETE /api/provisioning-jobs/{id}":                                       {summary: "Cancel a job, or tear down what a completed job created", ok: ok(202, job.Job{}), problems: []int{c}},
		"POST /api/provisioning-jobs/{id}/retry":                                   {summary: "Resume a failed job at the step that failed", ok: ok(202, job.Job{}), problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/events":                                   {summary: "Stream the job's committed changes as server-sent events", stream: true, problems: []int{http.StatusTooManyRequests}},
		"GET /api/catalog/types":                                                   {summary: "The catalog's (category, type) pairs and their settings schemas", ok: ok(200, typeList{})},
		"GET /api/catalog/types/{category}/{type}":                                 {summary: "One catalog type", ok: ok(200, catalog.Type{})},
		"POST /api/provisioners":                                                   {summary: "Register a remote provisioner", body: protocol.RegisterInput{}, ok: ok(201, protocol.Provisioner{}), problems: []int{c, http.StatusUnprocessableEntity}},
		"GET /api/provisioners":                                                    {summary: "List provisioners", ok: ok(200, provisionerList{})},
		"GET /api/provisioners/{id}":                                               {summary: "Read a provisioner", ok: ok(200, protocol.Provisioner{})},
		"DELETE /api/provisioners/{id}":                                            {summary: "Remove a remote provisioner", ok: noContent, problems: []int{c}},
		"GET /api/policies":                                                        {summary: "Every resource:action policy", ok: ok(200, policyList{})},
		"GET /api/roles":                                                           {summary: "System and custom roles", ok: ok(200, roleList{})},
		"POST /api/roles":                                                          {summary: "Create a custom role", body: createRoleRequest{}, ok: ok(201, rbac.Role{}), problems: []int{c}},
		"GET /api/roles/{id}":                                                      {summary: "Read a role", ok: ok(200, rbac.Role{})},
		"DELETE /api/roles/{id}":                                                   {summary: "Delete a custom role", ok: noContent, problems: []int{c}},
		"GET /api/role-assignments":                                                {summary: "List role assignments", params: byEmailParams{}, ok: ok(200, assignmentList{})},
		"POST /api/role-assignments":                                               {summary: "Assign a role, org-wide or at a scope", body: createAssignmentRequest{}, ok: ok(201, rbac.Assignment{}), problems: []int{c}},
		"DELETE /api/role-assignments/{id}":                                        {summary: "Remove a role assignment", ok: noContent},
		"GET /api/users":                                                           {summary: "List users", ok: ok(200, userList{})},
		"POST /api/users":                                                          {summary: "Add a user", body: createUserRequest{}, ok: ok(201, store.User{}), problems: []int{c}},
		"DELETE /api/users/{email}":                                                {summary: "Remove a user (their tokens stop working)", ok: noContent},
		"GET /api/users/{email}/permissions":                                       {summary: "A user's effective permissions", ok: ok(200, EffectivePermissions{})},
		"GET /api/teams":                                                           {summary: "List teams", ok: ok(200, teamList{})},
		"POST /api/teams":                                                          {summary: "Create a team", body: createTeamRequest{}, ok: ok(201, store.Team{}), problems: []int{c, http.StatusUnprocessableEntity}},
		"GET /api/teams/{id}":                                                      {summary: "Read a team", ok: ok(200, store.Team{})},
		"PATCH /api/teams/{id}":                                                    {summary: "Change a team's name, members or spaces", body: patchTeamRequest{}, ok: ok(200, store.Team{}), problems: []int{c, http.StatusUnprocessableEntity}},
		"DELETE /api/teams/{id}":                                                   {summary: "Delete a team", ok: noContent},
		"GET /api/tokens":                                                          {summary: "List API tokens (never their secrets)", params: byEmailParams{}, ok: ok(200, tokenList{})},
		"POST /api/tokens":                                                         {summary: "Create an API token; the secret is shown once", body: createTokenRequest{}, ok: ok(201, CreatedToken{})},
		"DELETE /api/tokens/{id}":                                                  {summary: "Revoke an API token", ok: noContent},
		"GET /api/audit-logs":                                                      {summary: "The audit log, a page at a time, or exported", params: auditParams{}, ok: ok(200, AuditPage{}), contents: []string{"text/csv", "application/x-ndjson"}},
		"GET /api/provisioning-jobs/{id}/databases":                                {summary: "Databases of a datastore job", ok: ok(200, databaseList{})},
		"POST /api/provisioning-jobs/{id}/rotate-credentials":                      {summary: "Rotate a datastore credential (the admin's, or the one a connection holds) as steps of the job", body: rotateCredentialsRequest{}, ok: ok(202, job.Job{}), problems: []int{c}},
		"POST /api/provisioning-jobs/{id}/databases":                               {summary: "Create a database (the same request again answers the existing one)", body: datastore.CreateDatabaseParams{}, ok: map[int]any{200: datastore.Database{}, 201: datastore.Database{}}, problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}":                         {summary: "Read a database", ok: ok(200, datastore.Database{})},
		"DELETE /api/provisioning-jobs/{id}/databases/{dbID}":                      {summary: "Drop a database", ok: noContent, problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/connections":                              {summary: "Connections of a datastore job", ok: ok(200, connectionList{})},
		"POST /api/provisioning-jobs/{id}/connections":                             {summary: "Create a connection (credentials stored as a secret reference)", body: createConnectionRequest{}, bodyOptional: true, ok: ok(201, datastore.Connection{}), problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/connections/{connID}":                     {summary: "Read a connection", ok: ok(200, datastore.Connection{})},
		"DELETE /api/provisioning-jobs/{id}/connections/{connID}":                  {summary: "Delete a connection", ok: noContent, problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}/connections":             {summary: "Connections to one database", ok: ok(200, connectionList{})},
		"POST /api/provisioning-jobs/{id}/databases/{dbID}/connections":            {summary: "Create a connection to one database", body: createConnectionRequest{}, bodyOptional: true, ok: ok(201, datastore.Connection{}), problems: []int{c}},
		"GET /api/provisioning-jobs/{id}/databases/{dbID}/connections/{connID}":    {summary: "Read a connection", ok: ok(200, datastore.Connection{})},
		"DELETE /api/provisioning-jobs/{id}/databases/{dbID}/connections/{connID}": {summary: "Delete a connection", ok: noContent, problems: []int{c}},
		"POST /api/secrets/reveal":                                                 {summary: "Reveal the value behind a secret reference (audited)", body: revealRequest{}, ok: ok(200, revealAnswer{})},
		"GET /api/catalog/components":                                              {summary: "The Helm component catalog", ok: ok(200, componentList{})},
		"POST /api/provisioning-jobs/install-component":                            {summary: "Install a catalog component into a cluster space", body: installComponentRequest{}, ok: ok(201, job.Job{}), problems: []int{c}},
		"POST /api/spaces/register-cluster":                                        {summary: "Register an existing Kubernetes cluster as a space", body: registerClusterRequest{}, ok: ok(201, store.Space{}), problems: []int{c, http.StatusBadGateway}},
	}
	maps.Copy(d, remediationDocs())
	maps.Copy(d, driftDocs())
	maps.Copy(d, updateDocs())
	maps.Copy(d, approvalDocs())
	return d
}

var pathParam = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// pathParams returns a struct type whose path tags name the pattern's parameters.
func pathParams(pattern string) any {
	var fields []reflect.StructField
	for _, m := range pathParam.FindAllStringSubmatch(pattern, -1) {
		fields = append(fields, reflect.StructField{Name: "P" + m[1], Type: reflect.TypeFor[string](),
			Tag: reflect.StructTag(fmt.Sprintf(`path:"%s" minLength:"1"`, m[1]))})
	}
	if fields == nil {
		return nil
	}
	return reflect.New(reflect.StructOf(fields)).Interface()
}

// OpenAPI returns the OpenAPI 3.1 document of every route this server mounts under /api.
func (s *Server) OpenAPI() ([]byte, error) {
	s.openapiOnce.Do(func() { s.openapiDoc, s.openapiErr = s.buildOpenAPI() })
	return s.openapiDoc, s.openapiErr
}

// schemaNames maps the schema name a moved type would get to the one it had, so that the
// document stays the same when a type moves to another package.
var schemaNames = map[string]string{
	"ValidationFieldError":     "ApiFieldError",
	"StoreAuditEntry":          "AuditEntry",
	"StoreCatalogPair":         "CatalogPair",
	"StoreDatastoreConnection": "DatastoreConnection",
	"StoreDatastoreDatabase":   "DatastoreDatabase",
	"StoreDatastoreEndpoint":   "DatastoreEndpoint",
	"StoreProvisioner":         "ProtocolProvisioner",
	"StoreRemediationDelivery": "RemediationDelivery",
	"StoreRemediationEvent":    "RemediationEvent",
	"StoreRole":                "RbacRole",
	"StoreRoleAssignment":      "RbacAssignment",
}

func (s *Server) buildOpenAPI() ([]byte, error) {
	r := openapi31.NewReflector()
	r.Spec.Info.WithTitle("Groundwork API").WithVersion("1").
		WithDescription("Groundwork's REST API. Every operation needs `Authorization: Bearer <token>`. " +
			"Errors are RFC 9457 problems (application/problem+json) that name the offending field. " +
			"Lists answer {\"data\": [...]}; provisioning jobs page with cursor/nextCursor, the audit log with page/limit/total.")
	// A pointer to a shared schema may be null where it is not omitted.
	r.JSONSchemaReflector().DefaultOptions = append(r.JSONSchemaReflector().DefaultOptions,
		func(rc *jsonschema.ReflectContext) { rc.EnvelopNullability = true },
		// Field errors moved to the validation package, and the records the store keeps to
		// package store; their schemas keep the names clients generated from earlier documents
		// already use.
		jsonschema.InterceptDefName(func(_ reflect.Type, name string) string {
			if old, ok := schemaNames[name]; ok {
				return old
			}
			return name
		}))
	r.Spec.SetHTTPBearerTokenSecurity("bearer", "opaque", "an API token (gw_…) or the bootstrap admin token")
	r.Spec.Security = []map[string][]string{{"bearer": {}}}
	docs := s.docs()
	routes := s.allRoutes()
	sort.Slice(routes, func(i, j int) bool {
		return routes[i].path+" "+routes[i].method < routes[j].path+" "+routes[j].method
	})
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		d, ok := docs[key]
		if !ok {
			return nil, fmt.Errorf("openapi: route %s has no opDoc", key)
		}
		oc, err := r.NewOperationContext(rt.method, rt.path)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", key, err)
		}
		oc.SetSummary(d.summary)
		oc.SetID(operationID(rt.method, rt.path))
		oc.SetTags(tagOf(rt.path))
		oc.SetDescription("Needs the `" + rt.policy + "` permission.")
		if pp := pathParams(rt.path); pp != nil {
			oc.AddReqStructure(pp)
		}
		if d.params != nil {
			oc.AddReqStructure(d.params)
		}
		if d.body != nil {
			oc.AddReqStructure(d.body, openapi.WithContentType("application/json"))
		}
		statuses := []int{}
		for st := range d.ok {
			statuses = append(statuses, st)
		}
		sort.Ints(statuses)
		for _, st := range statuses {
			if v := d.ok[st]; v != nil {
				oc.AddRespStructure(v, openapi.WithHTTPStatus(st), openapi.WithContentType("application/json"))
			} else {
				oc.AddRespStructure(nil, openapi.WithHTTPStatus(st))
			}
		}
		if d.stream {
			oc.AddRespStructure(nil, openapi.WithHTTPStatus(http.StatusOK), openapi.WithContentType("text/event-stream"))
		}
		for _, ct := range d.contents {
			oc.AddRespStructure(nil, openapi.WithHTTPStatus(http.StatusOK), openapi.WithContentType(ct))
		}
		for _, st := range problemStatuses(rt.path, d) {
			oc.AddRespStructure(Problem{}, openapi.WithHTTPStatus(st), openapi.WithContentType("application/problem+json"))
		}
		if err := r.AddOperation(oc); err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", key, err)
		}
		op := r.Spec.Paths.MapOfPathItemValues[rt.path]
		if d.stream {
			describeStream(op.Get)
		}
		if d.body != nil && d.bodyOptional {
			if rb := operationOf(&op, rt.method).RequestBody; rb != nil && rb.RequestBody != nil {
				rb.RequestBody.Required = nil
			}
		}
		r.Spec.Paths.MapOfPathItemValues[rt.path] = op
	}
	addLinks(r, routes, docs)
	addOpenAPIRoute(r)
	for _, sc := range r.Spec.Components.Schemas {
		closeObjects(sc)
	}
	b, err := json.MarshalIndent(r.Spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return b, nil
}

// addLinks links each create (POST answering 201) to the operations on what it created: the
// routes one path parameter below it, whose new parameter is the created object's id (a user's
// email). Clients and testers follow them from a created object to its reads and deletes.
func addLinks(r *openapi31.Reflector, routes []route, docs map[string]opDoc) {
	for _, src := range routes {
		d := docs[src.method+" "+src.path]
		if src.method != http.MethodPost || d.ok[http.StatusCreated] == nil {
			continue
		}
		srcParams := pathParam.FindAllStringSubmatch(src.path, -1)
		for _, dst := range routes {
			rest, ok := strings.CutPrefix(dst.path, src.path+"/{")
			if !ok {
				continue
			}
			dstParams := pathParam.FindAllStringSubmatch(dst.path, -1)
			if len(dstParams) != len(srcParams)+1 {
				continue
			}
			created, _, _ := strings.Cut(rest, "}")
			field := "id"
			if created == "email" {
				field = "email"
			}
			params := map[string]string{created: "$response.body#/" + field}
			for _, m := range srcParams {
				params[m[1]] = "$request.path." + m[1]
			}
			item := r.Spec.Paths.MapOfPathItemValues[src.path]
			resp := item.Post.Responses.MapOfResponseOrReferenceValues["201"]
			if resp.Response == nil {
				continue
			}
			id := operationID(dst.method, dst.path)
			resp.Response.WithLinksItem(id, openapi31.LinkOrReference{Link: (&openapi31.Link{}).WithOperationID(id).WithParameters(params)})
			item.Post.Responses.MapOfResponseOrReferenceValues["201"] = resp
			r.Spec.Paths.MapOfPathItemValues[src.path] = item
		}
	}
}

// closeObjects says of every struct's schema that it has no other properties: requests are
// decoded with unknown fields refused, and answers are encoded from the same structs.
func closeObjects(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["properties"]; ok {
			if _, set := v["additionalProperties"]; !set {
				v["additionalProperties"] = false
			}
		}
		for _, c := range v {
			closeObjects(c)
		}
	case []any:
		for _, c := range v {
			closeObjects(c)
		}
	}
}

// problemStatuses are the problem answers of a route: the ones every route has and its own.
func problemStatuses(path string, d opDoc) []int {
	set := map[int]bool{http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusInternalServerError: true}
	if d.body != nil || d.params != nil {
		set[http.StatusBadRequest] = true
	}
	if strings.Contains(path, "{") || d.body != nil {
		set[http.StatusNotFound] = true
	}
	for _, st := range d.problems {
		set[st] = true
	}
	out := make([]int, 0, len(set))
	for st := range set {
		out = append(out, st)
	}
	sort.Ints(out)
	return out
}

func operationOf(p *openapi31.PathItem, method string) *openapi31.Operation {
	switch method {
	case http.MethodGet:
		return p.Get
	case http.MethodPost:
		return p.Post
	case http.MethodPatch:
		return p.Patch
	case http.MethodPut:
		return p.Put
	case http.MethodDelete:
		return p.Delete
	}
	return nil
}

// describeStream documents the event stream: media type text/event-stream, whose events are
// named "job" and carry the job's JSON (the schema of GET /api/provisioning-jobs/{id}).
func describeStream(op *openapi31.Operation) {
	resp := op.Responses.MapOfResponseOrReferenceValues["200"]
	if resp.Response == nil {
		return
	}
	resp.Response.Description = "A server-sent event stream: `event: job`, `id: <version>`, `data: <the job as JSON>` " +
		"(the job schema), one now and one per committed change until the job settles; `: keepalive` comments " +
		"in between. The stream ends when the job completes, fails, is cancelled or deleted, or when the token " +
		"expires or is revoked."
	mt := resp.Response.Content["text/event-stream"]
	mt.Schema = map[string]any{"type": "string"}
	resp.Response.Content["text/event-stream"] = mt
	op.Responses.MapOfResponseOrReferenceValues["200"] = resp
}

// addOpenAPIRoute documents the document's own route, which needs no token.
func addOpenAPIRoute(r *openapi31.Reflector) {
	oc, _ := r.NewOperationContext(http.MethodGet, openapiPath)
	oc.SetSummary("This OpenAPI document")
	oc.SetID("getOpenAPI")
	oc.SetTags("meta")
	oc.AddRespStructure(map[string]any{}, openapi.WithHTTPStatus(http.StatusOK), openapi.WithContentType("application/json"))
	_ = r.AddOperation(oc)
	op := r.Spec.Paths.MapOfPathItemValues[openapiPath]
	op.Get.Security = []map[string][]string{}
	r.Spec.Paths.MapOfPathItemValues[openapiPath] = op
}

// operationID names an operation from its method and path: GET /api/spaces/{id} → getSpacesId.
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, part := range strings.Split(strings.TrimPrefix(path, "/api/"), "/") {
		part = strings.Trim(part, "{}")
		for _, w := range strings.FieldsFunc(part, func(r rune) bool { return r == '-' || r == '_' }) {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

func tagOf(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/api/"), "/")
	return parts[0]
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := s.OpenAPI()
	if err != nil {
		s.log.Error("openapi document", "request_id", requestID(r.Context()), "error", err)
		writeProblem(w, r, problem(http.StatusInternalServerError, "internal error; the server log has details"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// OpenAPIDocument is the document of a server with every route table mounted (what
// `groundwork serve` mounts), built without a store: what `groundwork openapi` prints.
func OpenAPIDocument() ([]byte, error) {
	return New(Config{Datastores: &DatastoreConfig{}, Components: &ComponentConfig{}, Remediation: &RemediationConfig{}}).OpenAPI()
}
