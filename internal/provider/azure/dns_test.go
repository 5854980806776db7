package azure

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
	"github.com/groundworkhq/groundwork/internal/provider/azure/azurefake"
)

func recordSets(t *testing.T, c *Client) *armdns.RecordSetsClient {
	t.Helper()
	f, err := armdns.NewClientFactory(c.SubscriptionID, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	return f.NewRecordSetsClient()
}

func writes(cloud *azurefake.Cloud, part string) int {
	n := 0
	for _, call := range cloud.Calls() {
		if strings.Contains(strings.ToLower(call), strings.ToLower(part)) {
			n++
		}
	}
	return n
}

func TestZoneEnsure(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := DNSZoneDriver{C: c}
	j := testJob("job_zone0001")
	ctx := context.Background()
	z, err := d.EnsureZone(ctx, j, dnszone.Config{Domain: "Apps.Example.com."})
	if err != nil {
		t.Fatal(err)
	}
	want := "/subscriptions/" + azurefake.Subscription + "/resourceGroups/" + c.ResourceGroup + "/providers/Microsoft.Network/dnszones/apps.example.com"
	if z.ID != want || z.Name != "apps.example.com" {
		t.Errorf("zone = %s %s, want %s apps.example.com", z.ID, z.Name, want)
	}
	if len(z.NameServers) != 4 {
		t.Errorf("name servers %v, want Azure's four", z.NameServers)
	}
	var zone azurefake.Resource
	for _, r := range observeType(cloud, "Microsoft.Network/dnszones") {
		zone = r
	}
	for k, v := range map[string]string{TagJob: j.ID, TagOrg: j.OrgID, TagRole: roleZone, TagManagedBy: managedBy} {
		if zone.Tags[k] != v {
			t.Errorf("zone tag %s = %q, want %q", k, zone.Tags[k], v)
		}
	}
	again, err := d.EnsureZone(ctx, j, dnszone.Config{Name: "apps.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != z.ID || strings.Join(again.NameServers, ",") != strings.Join(z.NameServers, ",") {
		t.Errorf("ensure again = %+v, want %+v", again, z)
	}
	if n := writes(cloud, "PUT /subscriptions/"+azurefake.Subscription+"/resourceGroups/"+c.ResourceGroup+"/providers/Microsoft.Network/dnsZones/"); n != 1 {
		t.Errorf("%d PUTs of the zone for two ensures, want 1", n)
	}
}

func TestZoneRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg   dnszone.Config
		other bool // another job's zone of the domain is in the group
		code  string
	}{
		"private":                {cfg: dnszone.Config{Name: "a.example.com", Private: true, VPCID: "/x"}, code: "PrivateZoneUnsupported"},
		"another job's in group": {cfg: dnszone.Config{Name: "a.example.com"}, other: true, code: "NameTaken"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := testClient(t)
			d := DNSZoneDriver{C: c}
			ctx := context.Background()
			j := testJob("job_zonerefused")
			if tc.other {
				other := testJob("job_zoneother")
				if _, err := d.EnsureZone(ctx, other, tc.cfg); err != nil {
					t.Fatal(err)
				}
				defer func() {
					// The refused job's teardown leaves the other job's zone.
					if err := d.DeleteZone(ctx, j, tc.cfg.Name); err != nil {
						t.Errorf("delete: %v", err)
					}
					if z, err := d.EnsureZone(ctx, other, tc.cfg); err != nil || z.ID == "" {
						t.Errorf("the other job's zone after the refused job's delete: %+v, %v", z, err)
					}
				}()
			}
			_, err := d.EnsureZone(ctx, j, tc.cfg)
			if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err = %v, want user_action %s", err, tc.code)
			}
		})
	}
}

func TestRecords(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := DNSZoneDriver{C: c}
	j := testJob("job_records0001")
	ctx := context.Background()
	z, err := d.EnsureZone(ctx, j, dnszone.Config{Name: "example.net"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 300)
	recs := []dnszone.Record{
		{Name: "api.example.net", Type: "A", Values: []string{"10.0.0.5", "10.0.0.6"}},
		{Name: "v6.example.net.", Type: "aaaa", TTL: 60, Values: []string{"2001:db8::1"}},
		{Name: "www.example.net", Type: "CNAME", Values: []string{"api.example.net"}},
		{Name: "example.net", Type: "TXT", Values: []string{`"v=spf1 -all"`, long}},
		{Name: "example.net", Type: "MX", Values: []string{"10 mail.example.net"}},
		{Name: "sub.example.net", Type: "NS", Values: []string{"ns1.elsewhere.org"}},
	}
	for _, r := range recs {
		if err := d.UpsertRecord(ctx, z.ID, r); err != nil {
			t.Fatalf("upsert %s %s: %v", r.Type, r.Name, err)
		}
	}
	sets := recordSets(t, c)
	get := func(rel string, typ armdns.RecordType) *armdns.RecordSetProperties {
		t.Helper()
		v, err := sets.Get(ctx, c.ResourceGroup, "example.net", rel, typ, nil)
		if err != nil {
			t.Fatalf("get %s %s: %v", typ, rel, err)
		}
		return v.Properties
	}
	a := get("api", armdns.RecordTypeA)
	if len(a.ARecords) != 2 || *a.ARecords[0].IPv4Address != "10.0.0.5" || *a.TTL != 300 {
		t.Errorf("A api = %+v", a)
	}
	if v6 := get("v6", armdns.RecordTypeAAAA); *v6.AaaaRecords[0].IPv6Address != "2001:db8::1" || *v6.TTL != 60 {
		t.Errorf("AAAA v6 = %+v", v6)
	}
	if cn := get("www", armdns.RecordTypeCNAME); *cn.CnameRecord.Cname != "api.example.net" {
		t.Errorf("CNAME www = %+v", cn.CnameRecord)
	}
	txt := get("@", armdns.RecordTypeTXT)
	if len(txt.TxtRecords) != 2 || *txt.TxtRecords[0].Value[0] != "v=spf1 -all" {
		t.Errorf("TXT @ = %+v", txt.TxtRecords)
	} else if parts := txt.TxtRecords[1].Value; len(parts) != 2 || len(*parts[0]) != 255 || *parts[0]+*parts[1] != long {
		t.Errorf("a 300-character TXT value is %d strings, want 255 + 45", len(parts))
	}
	if mx := get("@", armdns.RecordTypeMX); *mx.MxRecords[0].Preference != 10 || *mx.MxRecords[0].Exchange != "mail.example.net" {
		t.Errorf("MX @ = %+v", mx.MxRecords[0])
	}
	if ns := get("sub", armdns.RecordTypeNS); *ns.NsRecords[0].Nsdname != "ns1.elsewhere.org" {
		t.Errorf("NS sub = %+v", ns.NsRecords[0])
	}

	// An upsert replaces the values.
	if err := d.UpsertRecord(ctx, z.ID, dnszone.Record{Name: "api.example.net", Type: "A", Values: []string{"10.0.0.7"}}); err != nil {
		t.Fatal(err)
	}
	if a := get("api", armdns.RecordTypeA); len(a.ARecords) != 1 || *a.ARecords[0].IPv4Address != "10.0.0.7" {
		t.Errorf("A api after upsert = %+v", a.ARecords)
	}

	// A delete with the values set removes the record set; one changed since is left.
	if err := d.DeleteRecord(ctx, z.ID, recs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := sets.Get(ctx, c.ResourceGroup, "example.net", "www", armdns.RecordTypeCNAME, nil); !notFound(err) {
		t.Errorf("CNAME www after delete: %v, want not found", err)
	}
	if err := d.DeleteRecord(ctx, z.ID, recs[0]); err != nil {
		t.Fatal(err)
	}
	get("api", armdns.RecordTypeA)
	// Deleting what is gone succeeds.
	if err := d.DeleteRecord(ctx, z.ID, recs[2]); err != nil {
		t.Errorf("delete of a gone record: %v", err)
	}

	// The zone's delete takes its record sets.
	if err := d.DeleteZone(ctx, j, "example.net"); err != nil {
		t.Fatal(err)
	}
	for _, r := range cloud.Resources() {
		if strings.Contains(strings.ToLower(r.ID), "/dnszones/") {
			t.Errorf("left after the zone's delete: %s", r.ID)
		}
	}
	if err := d.DeleteRecord(ctx, z.ID, recs[1]); err != nil {
		t.Errorf("delete of a record in a gone zone: %v", err)
	}
	if err := d.DeleteZone(ctx, j, "example.net"); err != nil {
		t.Errorf("delete of a gone zone: %v", err)
	}
	err = d.UpsertRecord(ctx, z.ID, recs[0])
	if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != "ZoneNotFound" {
		t.Errorf("upsert into a gone zone: %v, want user_action ZoneNotFound", err)
	}
}

func TestRecordRefusals(t *testing.T) {
	t.Parallel()
	c, cloud := testClient(t)
	d := DNSZoneDriver{C: c}
	z, err := d.EnsureZone(context.Background(), testJob("job_recrefused"), dnszone.Config{Name: "example.net"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		zone string
		rec  dnszone.Record
		code string
	}{
		"not an address":            {rec: dnszone.Record{Name: "a.example.net", Type: "A", Values: []string{"example.org"}}, code: "InvalidRecordValue"},
		"v6 in an A":                {rec: dnszone.Record{Name: "a.example.net", Type: "A", Values: []string{"::1"}}, code: "InvalidRecordValue"},
		"two CNAME values":          {rec: dnszone.Record{Name: "a.example.net", Type: "CNAME", Values: []string{"x.org", "y.org"}}, code: "InvalidRecordValue"},
		"MX without a host":         {rec: dnszone.Record{Name: "example.net", Type: "MX", Values: []string{"mail.example.net"}}, code: "InvalidRecordValue"},
		"SRV":                       {rec: dnszone.Record{Name: "_x._tcp.example.net", Type: "SRV", Values: []string{"1 1 80 a.example.net"}}, code: "UnsupportedRecordType"},
		"outside the zone":          {rec: dnszone.Record{Name: "a.example.org", Type: "A", Values: []string{"10.0.0.1"}}, code: "RecordOutsideZone"},
		"a suffix, not a subdomain": {rec: dnszone.Record{Name: "aexample.net", Type: "A", Values: []string{"10.0.0.1"}}, code: "RecordOutsideZone"},
		"not a zone id":             {zone: "Z0123456789", rec: dnszone.Record{Name: "a.example.net", Type: "A", Values: []string{"10.0.0.1"}}, code: "InvalidZoneID"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			zone := z.ID
			if tc.zone != "" {
				zone = tc.zone
			}
			before := writes(cloud, "/recordsets/") + writes(cloud, "/dnszones/example.net/")
			err := d.UpsertRecord(context.Background(), zone, tc.rec)
			if fe := fault.As(err); err == nil || fe.Class != job.ClassUserAction || fe.Code != tc.code {
				t.Fatalf("err = %v, want user_action %s", err, tc.code)
			}
			if after := writes(cloud, "/recordsets/") + writes(cloud, "/dnszones/example.net/"); after != before {
				t.Errorf("a refused record was sent to Azure")
			}
		})
	}
}
