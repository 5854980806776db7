package azurefake

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns"
	dnsfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns/fake"
)

// typeZone is a public DNS zone's type as Azure returns it (lower-case "dnszones", in ids too).
const typeZone = "Microsoft.Network/dnszones"

// dnsServers keep public DNS zones (listed across the subscription, ListPageSize to a page)
// and their record sets. A zone is made with the SOA and NS
// record sets at its apex, as Azure makes them, and its record sets go with it. A record set
// in a zone that is not there is refused 404 ParentResourceNotFound; If-None-Match: * on a
// zone that exists and If-Match on a record set whose etag moved are refused 412.
func (c *Cloud) dnsServers() []route {
	var zones int
	f := &dnsfake.ServerFactory{
		ZonesServer: dnsfake.ZonesServer{
			CreateOrUpdate: func(_ context.Context, rg, name string, p armdns.Zone, o *armdns.ZonesClientCreateOrUpdateOptions) (resp azfake.Responder[armdns.ZonesClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				id := zoneID(rg, name)
				old, exists := stored[armdns.Zone](c, id)
				if o != nil && o.IfNoneMatch != nil && *o.IfNoneMatch == "*" && exists ||
					o != nil && o.IfMatch != nil && (!exists || old.Etag == nil || *old.Etag != *o.IfMatch) {
					errResp.SetResponseError(http.StatusPreconditionFailed, "PreconditionFailed")
					return
				}
				// A zone keeps the name servers Azure gave it when it was made.
				var ns []any
				if exists && old.Properties != nil {
					for _, n := range old.Properties.NameServers {
						ns = append(ns, *n)
					}
				}
				p.Etag = to.Ptr(etag())
				v, r := store[armdns.ZonesClientCreateOrUpdateResponse](c, rg, id, typeZone, p, func(props map[string]any) {
					if ns == nil { // store holds c.mu while it calls this
						zones++
						n := zones%4 + 1
						for i := range 4 {
							ns = append(ns, fmt.Sprintf("ns%d-%02d.azure-dns.%s.", i+1, n, []string{"com", "net", "org", "info"}[i]))
						}
					}
					props["nameServers"] = ns
					props["zoneType"] = "Public"
					props["maxNumberOfRecordSets"] = 10000
					props["maxNumberOfRecordsPerRecordSet"] = 20
					delete(props, "provisioningState") // a zone has none
				})
				if r != nil {
					r.into(&errResp)
					return
				}
				if !exists {
					c.apexRecords(id, strings.ToLower(name), ns)
				}
				v.Properties.NumberOfRecordSets = to.Ptr(c.recordSets(id))
				code := http.StatusOK
				if !exists {
					code = http.StatusCreated
				}
				resp.SetResponse(code, v, nil)
				return
			},
			Get: func(_ context.Context, rg, name string, _ *armdns.ZonesClientGetOptions) (resp azfake.Responder[armdns.ZonesClientGetResponse], errResp azfake.ErrorResponder) {
				id := zoneID(rg, name)
				v, ok := stored[armdns.ZonesClientGetResponse](c, id)
				if !ok {
					errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
					return
				}
				if v.Properties != nil {
					v.Properties.NumberOfRecordSets = to.Ptr(c.recordSets(id))
				}
				resp.SetResponse(http.StatusOK, v, nil)
				return
			},
			BeginDelete: func(_ context.Context, rg, name string, _ *armdns.ZonesClientBeginDeleteOptions) (azfake.PollerResponder[armdns.ZonesClientDeleteResponse], azfake.ErrorResponder) {
				return deleter[armdns.ZonesClientDeleteResponse](c, zoneID(rg, name), "")
			},
			NewListPager: func(*armdns.ZonesClientListOptions) azfake.PagerResponder[armdns.ZonesClientListResponse] {
				return paged(ofType[*armdns.Zone](c, typeZone), func(zs []*armdns.Zone) armdns.ZonesClientListResponse {
					return armdns.ZonesClientListResponse{ZoneListResult: armdns.ZoneListResult{Value: zs}}
				})
			},
		},
		RecordSetsServer: dnsfake.RecordSetsServer{
			CreateOrUpdate: func(_ context.Context, rg, zone, rel string, typ armdns.RecordType, p armdns.RecordSet, o *armdns.RecordSetsClientCreateOrUpdateOptions) (resp azfake.Responder[armdns.RecordSetsClientCreateOrUpdateResponse], errResp azfake.ErrorResponder) {
				zid := zoneID(rg, zone)
				if _, ok := stored[armdns.Zone](c, zid); !ok {
					errResp.SetResponseError(http.StatusNotFound, "ParentResourceNotFound")
					return
				}
				if typ == armdns.RecordTypeSOA {
					errResp.SetResponseError(http.StatusBadRequest, "BadRequest")
					return
				}
				id := recordSetID(zid, typ, rel)
				old, exists := stored[armdns.RecordSet](c, id)
				if o != nil && o.IfNoneMatch != nil && *o.IfNoneMatch == "*" && exists ||
					o != nil && o.IfMatch != nil && (!exists || old.Etag == nil || *old.Etag != *o.IfMatch) {
					errResp.SetResponseError(http.StatusPreconditionFailed, "PreconditionFailed")
					return
				}
				p.Etag = to.Ptr(etag())
				v, r := store[armdns.RecordSetsClientCreateOrUpdateResponse](c, rg, id, typeZone+"/"+string(typ), p, func(props map[string]any) {
					props["fqdn"] = fqdn(rel, zone)
				})
				if r != nil {
					r.into(&errResp)
					return
				}
				code := http.StatusOK
				if !exists {
					code = http.StatusCreated
				}
				resp.SetResponse(code, v, nil)
				return
			},
			Get: func(_ context.Context, rg, zone, rel string, typ armdns.RecordType, _ *armdns.RecordSetsClientGetOptions) (azfake.Responder[armdns.RecordSetsClientGetResponse], azfake.ErrorResponder) {
				return getter[armdns.RecordSetsClientGetResponse](c, recordSetID(zoneID(rg, zone), typ, rel))
			},
			Delete: func(_ context.Context, rg, zone, rel string, typ armdns.RecordType, o *armdns.RecordSetsClientDeleteOptions) (resp azfake.Responder[armdns.RecordSetsClientDeleteResponse], errResp azfake.ErrorResponder) {
				zid := zoneID(rg, zone)
				if _, ok := stored[armdns.Zone](c, zid); !ok {
					errResp.SetResponseError(http.StatusNotFound, "ParentResourceNotFound")
					return
				}
				if typ == armdns.RecordTypeSOA || typ == armdns.RecordTypeNS && rel == "@" {
					// Azure keeps the apex SOA and NS for as long as the zone.
					errResp.SetResponseError(http.StatusBadRequest, "BadRequest")
					return
				}
				id := recordSetID(zid, typ, rel)
				old, exists := stored[armdns.RecordSet](c, id)
				if o != nil && o.IfMatch != nil && (!exists || old.Etag == nil || *old.Etag != *o.IfMatch) {
					errResp.SetResponseError(http.StatusPreconditionFailed, "PreconditionFailed")
					return
				}
				if found, _ := c.remove(id, ""); !found {
					resp.SetResponse(http.StatusNoContent, armdns.RecordSetsClientDeleteResponse{}, nil)
					return
				}
				resp.SetResponse(http.StatusOK, armdns.RecordSetsClientDeleteResponse{}, nil)
				return
			},
		},
	}
	tr := dnsfake.NewServerFactoryTransport(f)
	return []route{{prefix: "ZonesClient", tr: tr}, {prefix: "RecordSetsClient", tr: tr}}
}

// zoneID is a zone's id as Azure returns it: the zone name lower-case, under "dnszones".
func zoneID(rg, name string) string { return armID(rg, typeZone, strings.ToLower(name)) }

// recordSetID is a record set's id: the zone's, the type, the relative name ("@" at the apex).
func recordSetID(zoneID string, typ armdns.RecordType, rel string) string {
	return zoneID + "/" + string(typ) + "/" + strings.ToLower(rel)
}

func fqdn(rel, zone string) string {
	if rel == "@" {
		return strings.ToLower(zone) + "."
	}
	return strings.ToLower(rel+"."+zone) + "."
}

// apexRecords are the SOA and NS record sets Azure makes with a zone.
func (c *Cloud) apexRecords(zoneID, zone string, nameServers []any) {
	var ns []map[string]any
	for _, n := range nameServers {
		ns = append(ns, map[string]any{"nsdname": n})
	}
	put := func(typ string, props map[string]any) {
		props["fqdn"] = zone + "."
		props["provisioningState"] = "Succeeded"
		id := zoneID + "/" + typ + "/@"
		raw, _ := json.Marshal(map[string]any{"id": id, "name": "@", "type": typeZone + "/" + typ, "etag": etag(), "properties": props})
		c.mu.Lock()
		c.objs[strings.ToLower(id)] = raw
		c.mu.Unlock()
	}
	host := "ns1-01.azure-dns.com."
	if len(nameServers) > 0 {
		host = fmt.Sprint(nameServers[0])
	}
	put("SOA", map[string]any{"TTL": 3600, "SOARecord": map[string]any{"host": host, "email": "azuredns-hostmaster.microsoft.com",
		"serialNumber": 1, "refreshTime": 3600, "retryTime": 300, "expireTime": 2419200, "minimumTTL": 300}})
	put("NS", map[string]any{"TTL": 172800, "NSRecords": ns})
}

// etag is a fresh entity tag, as Azure gives a zone or record set on every write.
func etag() string { return rand.Text() }

// recordSets counts the record sets of the zone at id.
func (c *Cloud) recordSets(id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := strings.ToLower(id) + "/"
	var n int64
	for k := range c.objs {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
