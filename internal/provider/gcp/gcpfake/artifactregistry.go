package gcpfake

import (
	"fmt"
	"net/http"
	"time"
)

// HostArtifactRegistry is Artifact Registry's host.
const HostArtifactRegistry = "artifactregistry.googleapis.com"

// Artifact Registry (artifactregistry/v1): repositories, made and deleted by
// google.longrunning operations. A repository being made is not readable yet, but its name
// is taken.
func (c *Cloud) registerArtifactRegistry() {
	base := "/v1/projects/{project}/locations/{location}"
	c.Handle(HostArtifactRegistry, "POST "+base+"/repositories", c.arCreate)
	c.Handle(HostArtifactRegistry, "GET "+base+"/repositories", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		var out []map[string]any
		for _, rep := range c.Under(HostArtifactRegistry, parentOf(r)+"/repositories") {
			out = append(out, rep.Body)
		}
		WriteJSON(w, http.StatusOK, map[string]any{"repositories": out})
	})
	c.Handle(HostArtifactRegistry, "GET "+base+"/repositories/{repo}", func(w http.ResponseWriter, r *http.Request) {
		if rep, ok := c.arRepo(w, r); ok {
			WriteJSON(w, http.StatusOK, rep.Body)
		}
	})
	c.Handle(HostArtifactRegistry, "DELETE "+base+"/repositories/{repo}", func(w http.ResponseWriter, r *http.Request) {
		rep, ok := c.arRepo(w, r)
		if !ok {
			return
		}
		op, _ := c.StartOp(HostArtifactRegistry, parentOf(r)+"/operations/"+newUUID(), "delete", rep.Name, "", func() (any, *Status) {
			delete(c.resources, HostArtifactRegistry+" "+rep.Name)
			return map[string]any{"@type": "type.googleapis.com/google.protobuf.Empty"}, nil
		})
		WriteJSON(w, http.StatusOK, LRO(*op, arMetadata))
	})
	c.Handle(HostArtifactRegistry, "GET "+base+"/operations/{op}", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		op, ok := c.Operation(HostArtifactRegistry, parentOf(r)+"/operations/"+r.PathValue("op"))
		if !ok {
			NotFound(w, "operation "+r.PathValue("op"))
			return
		}
		WriteJSON(w, http.StatusOK, LRO(op, arMetadata))
	})
}

const arMetadata = "type.googleapis.com/google.devtools.artifactregistry.v1.OperationMetadata"

func parentOf(r *http.Request) string {
	return "projects/" + r.PathValue("project") + "/locations/" + r.PathValue("location")
}

func (c *Cloud) arRepo(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	rep, ok := c.Lookup(HostArtifactRegistry, parentOf(r)+"/repositories/"+r.PathValue("repo"))
	if !ok || rep.Pending {
		NotFound(w, parentOf(r)+"/repositories/"+r.PathValue("repo"))
		return Resource{}, false
	}
	return rep, true
}

var arFormats = map[string]bool{"DOCKER": true, "MAVEN": true, "NPM": true, "PYTHON": true, "APT": true, "YUM": true, "GO": true}

func (c *Cloud) arCreate(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	id := r.URL.Query().Get("repositoryId")
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	if !validName(id) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("invalid repository id %q", id), "badRequest")
		return
	}
	if f, _ := in["format"].(string); !arFormats[f] {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("invalid format %q", in["format"]), "badRequest")
		return
	}
	full := parentOf(r) + "/repositories/" + id
	if _, ok := c.Lookup(HostArtifactRegistry, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", "the repository already exists", "alreadyExists")
		return
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	in["name"], in["createTime"], in["updateTime"] = full, now, now
	in["mode"] = "STANDARD_REPOSITORY"
	c.Put(Resource{Service: HostArtifactRegistry, Kind: "artifactregistry.repository", Name: full, Body: in, Pending: true})
	op, _ := c.StartOp(HostArtifactRegistry, parentOf(r)+"/operations/"+newUUID(), "create", full, "", func() (any, *Status) {
		rep, ok := c.resources[HostArtifactRegistry+" "+full]
		if !ok {
			return nil, &Status{Code: 10, Message: "the repository was deleted meanwhile", Reason: "ABORTED"}
		}
		rep.Pending = false
		body := map[string]any{"@type": "type.googleapis.com/google.devtools.artifactregistry.v1.Repository"}
		for k, v := range rep.Body {
			body[k] = v
		}
		return body, nil
	})
	WriteJSON(w, http.StatusOK, LRO(*op, arMetadata))
}
