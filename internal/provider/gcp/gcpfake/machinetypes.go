package gcpfake

import (
	"fmt"
	"net/http"
)

func init() { registrations = append(registrations, registerMachineTypes) }

// machineTypes are the machine types every zone of the fake offers: general purpose (e2,
// n2), the sizes GKE node pools and templates are usually given.
var machineTypes = []struct {
	name      string
	cpus, mib int
}{
	{"e2-small", 2, 2048}, {"e2-medium", 2, 4096}, {"e2-standard-2", 2, 8192}, {"e2-standard-4", 4, 16384},
	{"e2-standard-8", 8, 32768}, {"n2-standard-2", 2, 8192}, {"n2-standard-4", 4, 16384}, {"n2-standard-8", 8, 32768},
	{"n2-highmem-4", 4, 32768},
}

// registerMachineTypes serves compute's machineTypes list and get, read-only.
func registerMachineTypes(c *Cloud) {
	body := func(r *http.Request, i int) map[string]any {
		m := machineTypes[i]
		zone := "projects/" + r.PathValue("project") + "/zones/" + r.PathValue("scope")
		return map[string]any{"kind": "compute#machineType", "id": fmt.Sprint(1000 + i), "name": m.name,
			"guestCpus": m.cpus, "memoryMb": m.mib, "zone": r.PathValue("scope"),
			"description": fmt.Sprintf("%d vCPUs, %d GB RAM", m.cpus, m.mib/1024),
			"selfLink":    SelfLinkBase + zone + "/machineTypes/" + m.name}
	}
	c.Handle(HostCompute, "GET "+ComputePath("zones")+"machineTypes", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		var all []map[string]any
		for i := range machineTypes {
			all = append(all, body(r, i))
		}
		page, next := Page(r, all)
		out := map[string]any{"kind": "compute#machineTypeList", "items": page}
		if next != "" {
			out["nextPageToken"] = next
		}
		WriteJSON(w, http.StatusOK, out)
	})
	c.Handle(HostCompute, "GET "+ComputePath("zones")+"machineTypes/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		for i, m := range machineTypes {
			if m.name == r.PathValue("name") {
				WriteJSON(w, http.StatusOK, body(r, i))
				return
			}
		}
		NotFound(w, "projects/"+r.PathValue("project")+"/zones/"+r.PathValue("scope")+"/machineTypes/"+r.PathValue("name"))
	})
}
