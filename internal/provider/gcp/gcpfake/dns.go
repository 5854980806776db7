package gcpfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HostDNS is Cloud DNS's host.
const HostDNS = "dns.googleapis.com"

// Cloud DNS (dns/v1): managed zones, answered at once, and their record sets. A new zone
// holds its SOA and NS record sets, and a zone is deleted only when it holds nothing else.
func (c *Cloud) registerDNS() {
	zones := "/dns/v1/projects/{project}/managedZones"
	c.Handle(HostDNS, "POST "+zones, c.dnsCreateZone)
	c.Handle(HostDNS, "GET "+zones, func(w http.ResponseWriter, r *http.Request) {
		if !c.ownProject(w, r) {
			return
		}
		var all []map[string]any
		for _, z := range c.Under(HostDNS, "projects/"+c.Project+"/managedZones") {
			all = append(all, z.Body)
		}
		page, next := Page(r, all)
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "dns#managedZonesListResponse", "managedZones": page, "nextPageToken": next})
	})
	c.Handle(HostDNS, "GET "+zones+"/{zone}", func(w http.ResponseWriter, r *http.Request) {
		if z, ok := c.dnsZone(w, r); ok {
			WriteJSON(w, http.StatusOK, z.Body)
		}
	})
	c.Handle(HostDNS, "DELETE "+zones+"/{zone}", c.dnsDeleteZone)
	sets := zones + "/{zone}/rrsets"
	c.Handle(HostDNS, "POST "+sets, c.dnsCreateRecords)
	c.Handle(HostDNS, "GET "+sets, func(w http.ResponseWriter, r *http.Request) {
		z, ok := c.dnsZone(w, r)
		if !ok {
			return
		}
		var all []map[string]any
		for _, rr := range c.Under(HostDNS, z.Name+"/rrsets") {
			all = append(all, rr.Body)
		}
		page, next := Page(r, all)
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "dns#resourceRecordSetsListResponse", "rrsets": page, "nextPageToken": next})
	})
	c.Handle(HostDNS, "GET "+sets+"/{name}/{type}", func(w http.ResponseWriter, r *http.Request) {
		if rr, ok := c.dnsRecord(w, r); ok {
			WriteJSON(w, http.StatusOK, rr.Body)
		}
	})
	c.Handle(HostDNS, "PATCH "+sets+"/{name}/{type}", func(w http.ResponseWriter, r *http.Request) {
		rr, ok := c.dnsRecord(w, r)
		if !ok {
			return
		}
		var in map[string]any
		if !ReadJSON(w, r, &in) {
			return
		}
		for _, k := range []string{"ttl", "rrdatas"} {
			if v, ok := in[k]; ok {
				rr.Body[k] = v
			}
		}
		c.Put(rr)
		WriteJSON(w, http.StatusOK, rr.Body)
	})
	c.Handle(HostDNS, "DELETE "+sets+"/{name}/{type}", func(w http.ResponseWriter, r *http.Request) {
		rr, ok := c.dnsRecord(w, r)
		if !ok {
			return
		}
		c.Remove(HostDNS, rr.Name)
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "dns#resourceRecordSetsDeleteResponse"})
	})
}

// ownProject refuses a request for another project as Google does: the caller has no
// permission there (or it does not exist).
func (c *Cloud) ownProject(w http.ResponseWriter, r *http.Request) bool {
	if p := r.PathValue("project"); p != c.Project {
		WriteError(w, http.StatusForbidden, "PERMISSION_DENIED",
			fmt.Sprintf("The caller does not have permission on project %s (or it may not exist)", p), "forbidden")
		return false
	}
	return true
}

func (c *Cloud) dnsZone(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	if !c.ownProject(w, r) {
		return Resource{}, false
	}
	z, ok := c.Lookup(HostDNS, "projects/"+c.Project+"/managedZones/"+r.PathValue("zone"))
	if !ok {
		NotFound(w, "managedZone "+r.PathValue("zone"))
		return Resource{}, false
	}
	return z, true
}

func rrsetKey(zone Resource, name, typ string) string {
	return zone.Name + "/rrsets/" + name + "|" + typ
}

func (c *Cloud) dnsRecord(w http.ResponseWriter, r *http.Request) (Resource, bool) {
	z, ok := c.dnsZone(w, r)
	if !ok {
		return Resource{}, false
	}
	rr, ok := c.Lookup(HostDNS, rrsetKey(z, r.PathValue("name"), r.PathValue("type")))
	if !ok {
		NotFound(w, "rrset "+r.PathValue("name")+" "+r.PathValue("type"))
		return Resource{}, false
	}
	return rr, true
}

func (c *Cloud) dnsCreateZone(w http.ResponseWriter, r *http.Request) {
	if !c.ownProject(w, r) {
		return
	}
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	zname, _ := in["name"].(string)
	dnsName, _ := in["dnsName"].(string)
	if !validName(zname) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid value for 'entity.managedZone.name': '%s'", zname), "invalid")
		return
	}
	if !strings.HasSuffix(dnsName, ".") || !strings.Contains(strings.TrimSuffix(dnsName, "."), ".") {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid value for 'entity.managedZone.dnsName': '%s'", dnsName), "invalid")
		return
	}
	full := "projects/" + c.Project + "/managedZones/" + zname
	if _, ok := c.Lookup(HostDNS, full); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS", fmt.Sprintf("The resource 'entity.managedZone' named '%s' already exists", zname), "alreadyExists")
		return
	}
	if in["visibility"] == "private" {
		pvc, _ := in["privateVisibilityConfig"].(map[string]any)
		nets, _ := pvc["networks"].([]any)
		if len(nets) == 0 {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "A private zone needs at least one network.", "invalid")
			return
		}
		for _, n := range nets {
			u, _ := n.(map[string]any)["networkUrl"].(string)
			_, path, _ := strings.Cut(u, "/compute/v1/")
			if _, ok := c.Lookup("compute.googleapis.com", path); !ok {
				WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
					fmt.Sprintf("Invalid value for 'entity.managedZone.privateVisibilityConfig.networks[0].networkUrl': '%s'", u), "invalid")
				return
			}
		}
	}
	c.mu.Lock()
	id := c.next()
	c.mu.Unlock()
	in["kind"] = "dns#managedZone"
	in["id"] = fmt.Sprint(8000000000000000000 + id)
	in["creationTime"] = time.Now().UTC().Format(time.RFC3339Nano)
	ns := []any{"ns-cloud-a1.googledomains.com.", "ns-cloud-a2.googledomains.com.", "ns-cloud-a3.googledomains.com.", "ns-cloud-a4.googledomains.com."}
	in["nameServers"] = ns
	if in["visibility"] == nil {
		in["visibility"] = "public"
	}
	zone := Resource{Service: HostDNS, Kind: "dns#managedZone", Name: full, Body: in}
	c.Put(zone)
	c.Put(Resource{Service: HostDNS, Kind: "dns#resourceRecordSet", Name: rrsetKey(zone, dnsName, "SOA"), Body: map[string]any{
		"kind": "dns#resourceRecordSet", "name": dnsName, "type": "SOA", "ttl": 21600,
		"rrdatas": []any{"ns-cloud-a1.googledomains.com. cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300"}}})
	c.Put(Resource{Service: HostDNS, Kind: "dns#resourceRecordSet", Name: rrsetKey(zone, dnsName, "NS"), Body: map[string]any{
		"kind": "dns#resourceRecordSet", "name": dnsName, "type": "NS", "ttl": 21600, "rrdatas": ns}})
	WriteJSON(w, http.StatusOK, in)
}

func (c *Cloud) dnsDeleteZone(w http.ResponseWriter, r *http.Request) {
	z, ok := c.dnsZone(w, r)
	if !ok {
		return
	}
	records := c.Under(HostDNS, z.Name+"/rrsets")
	for _, rr := range records {
		if t := rr.Body["type"]; t != "SOA" && t != "NS" {
			WriteError(w, http.StatusBadRequest, "FAILED_PRECONDITION",
				fmt.Sprintf("The resource named '%s' cannot be deleted because it is not empty", r.PathValue("zone")), "containerNotEmpty")
			return
		}
	}
	for _, rr := range records {
		c.Remove(HostDNS, rr.Name)
	}
	c.Remove(HostDNS, z.Name)
	w.WriteHeader(http.StatusNoContent)
}

var recordTypes = map[string]bool{"A": true, "AAAA": true, "CNAME": true, "MX": true, "TXT": true, "NS": true, "SRV": true, "CAA": true, "PTR": true}

func (c *Cloud) dnsCreateRecords(w http.ResponseWriter, r *http.Request) {
	z, ok := c.dnsZone(w, r)
	if !ok {
		return
	}
	var in map[string]any
	if !ReadJSON(w, r, &in) {
		return
	}
	name, _ := in["name"].(string)
	typ, _ := in["type"].(string)
	zoneName, _ := z.Body["dnsName"].(string)
	if !recordTypes[typ] {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid value for 'entity.rrset.type': '%s'", typ), "invalid")
		return
	}
	if name != zoneName && !strings.HasSuffix(name, "."+zoneName) {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("The resource record set 'entity.rrset' named '%s' is not in zone '%s'", name, zoneName), "invalid")
		return
	}
	if typ == "CNAME" && name == zoneName {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "CNAME is not allowed at the zone apex", "cnameResourceRecordSetConflict")
		return
	}
	key := rrsetKey(z, name, typ)
	if _, ok := c.Lookup(HostDNS, key); ok {
		WriteError(w, http.StatusConflict, "ALREADY_EXISTS",
			fmt.Sprintf("The resource 'entity.rrset' named '%s (%s)' already exists", name, typ), "alreadyExists")
		return
	}
	in["kind"] = "dns#resourceRecordSet"
	c.Put(Resource{Service: HostDNS, Kind: "dns#resourceRecordSet", Name: key, Body: in})
	WriteJSON(w, http.StatusOK, in)
}

// validName is GCP's rule for most resource names: a lower-case letter, then up to 62
// lower-case letters, digits or '-', not ending in '-'.
func validName(n string) bool {
	if n == "" || len(n) > 63 || n[0] < 'a' || n[0] > 'z' || n[len(n)-1] == '-' {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
