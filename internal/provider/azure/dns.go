package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/dns/armdns"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
)

// roleZone is the tag role of a job's DNS zone.
const roleZone = "zone"

// DNSZoneDriver makes a job's public Azure DNS zone, named by the domain, in the space's
// resource group, and its record sets. Azure DNS zone names are not unique across Azure (each
// zone gets its own name servers to delegate to), but are within a resource group: a zone of
// the domain there that is not the job's is refused, never adopted.
type DNSZoneDriver struct{ C *Client }

var _ dnszone.Driver = DNSZoneDriver{}

// DNSZoneDriver implements provider.DNSZoneDrivers.
func (m *Module) DNSZoneDriver(ctx context.Context, j *job.Job) (dnszone.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return DNSZoneDriver{C: c}, nil
}

func (d DNSZoneDriver) factory() (*armdns.ClientFactory, error) {
	f, err := armdns.NewClientFactory(d.C.SubscriptionID, d.C.cred, d.C.opts)
	if err != nil {
		return nil, fault.System(err)
	}
	return f, nil
}

// zoneName is a domain as Azure names its zone: lower-case, no trailing dot.
func zoneName(domain string) string { return strings.ToLower(strings.TrimSuffix(domain, ".")) }

// EnsureZone implements dnszone.Driver: it makes (or finds) the job's zone and returns its
// resource id and the name servers to delegate the domain to.
func (d DNSZoneDriver) EnsureZone(ctx context.Context, j *job.Job, cfg dnszone.Config) (dnszone.Zone, error) {
	if cfg.Private {
		return dnszone.Zone{}, fault.UserAction(errors.New("private: Azure private DNS zones are not served by this module"), "PrivateZoneUnsupported",
			"Remove private (and vpcID) to make a public Azure DNS zone.", "")
	}
	zone := zoneName(firstOf(cfg.Domain, cfg.Name))
	if err := d.C.EnsureGroup(ctx, j.SpaceID); err != nil {
		return dnszone.Zone{}, err
	}
	f, err := d.factory()
	if err != nil {
		return dnszone.Zone{}, err
	}
	zones := f.NewZonesClient()
	rg := d.C.ResourceGroup
	read := func() (armdns.Zone, bool, error) {
		v, err := zones.Get(ctx, rg, zone, nil)
		st, err := stateOf(err, v.Tags, nil, j)
		if err != nil {
			return armdns.Zone{}, false, d.C.Classify(err)
		}
		return v.Zone, st.Found, nil
	}
	z, found, err := read()
	if err != nil {
		return dnszone.Zone{}, err
	}
	if !found {
		// If-None-Match: a zone someone made since the read is not overwritten (a PUT of
		// a zone replaces its tags); the next read says whose it is.
		v, err := zones.CreateOrUpdate(ctx, rg, zone, armdns.Zone{Location: to.Ptr("global"), Tags: tags(j, roleZone),
			Properties: &armdns.ZoneProperties{ZoneType: to.Ptr(armdns.ZoneTypePublic)}},
			&armdns.ZonesClientCreateOrUpdateOptions{IfNoneMatch: to.Ptr("*")})
		switch {
		case status(err) == http.StatusPreconditionFailed:
			if z, found, err = read(); err != nil {
				return dnszone.Zone{}, err
			}
			if !found {
				return dnszone.Zone{}, fault.Transientf("zone %s was made and deleted while it was being created", zone)
			}
		case err != nil:
			return dnszone.Zone{}, d.C.Classify(fmt.Errorf("create zone %s: %w", zone, err))
		default:
			z = v.Zone
		}
	}
	out := dnszone.Zone{Name: zone}
	if z.ID != nil {
		out.ID = *z.ID
	}
	if z.Properties != nil {
		for _, ns := range z.Properties.NameServers {
			if ns != nil {
				out.NameServers = append(out.NameServers, *ns)
			}
		}
	}
	return out, nil
}

// DeleteZone implements dnszone.Driver: it deletes the job's zone and, with it, every record
// set in it. A zone that is gone, or one of the domain that is not the job's, is nothing of
// the job's to delete.
func (d DNSZoneDriver) DeleteZone(ctx context.Context, j *job.Job, domain string) error {
	f, err := d.factory()
	if err != nil {
		return err
	}
	zones := f.NewZonesClient()
	rg, zone := d.C.ResourceGroup, zoneName(domain)
	ops := Ops{}
	return d.C.await(ctx, "deleting zone "+zone, func() (bool, error) {
		return remove(ctx, d.C, ops, "delete zone", func(ctx context.Context) (State, error) {
			v, err := zones.Get(ctx, rg, zone, nil)
			if err == nil && !owns(j, v.Tags) {
				return State{}, nil
			}
			return stateOf(err, v.Tags, nil, j)
		}, func(ctx context.Context, tok string) (*runtime.Poller[armdns.ZonesClientDeleteResponse], error) {
			return zones.BeginDelete(ctx, rg, zone, &armdns.ZonesClientBeginDeleteOptions{ResumeToken: tok})
		})
	})
}

// recordTarget is where a record set lives: its zone (from the zone's resource id) and its
// name relative to the zone ("@" for the apex).
type recordTarget struct {
	group, zone, relative string
	typ                   armdns.RecordType
}

func (d DNSZoneDriver) target(zoneID string, r dnszone.Record) (recordTarget, error) {
	id, err := arm.ParseResourceID(zoneID)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Network/dnszones") {
		return recordTarget{}, fault.UserAction(fmt.Errorf("zone id %q is not an Azure DNS zone's resource id", zoneID), "InvalidZoneID",
			"A record's zone is the zone's full resource id: /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Network/dnszones/<domain>.", "")
	}
	zone := zoneName(id.Name)
	name := zoneName(r.Name)
	t := recordTarget{group: id.ResourceGroupName, zone: zone, typ: armdns.RecordType(strings.ToUpper(r.Type))}
	switch {
	case name == zone:
		t.relative = "@"
	case strings.HasSuffix(name, "."+zone):
		t.relative = strings.TrimSuffix(name, "."+zone)
	default:
		return recordTarget{}, fault.UserAction(fmt.Errorf("record %s is not in zone %s", r.Name, zone), "RecordOutsideZone",
			"Name each record inside its zone: the zone's domain or a name ending in ."+zone+".", "")
	}
	return t, nil
}

// UpsertRecord implements dnszone.Driver: it sets the record set (name, type) to r's values,
// replacing what it held, as Route 53's UPSERT does.
func (d DNSZoneDriver) UpsertRecord(ctx context.Context, zoneID string, r dnszone.Record) error {
	t, err := d.target(zoneID, r)
	if err != nil {
		return err
	}
	props, err := recordProperties(t.typ, r)
	if err != nil {
		return err
	}
	f, err := d.factory()
	if err != nil {
		return err
	}
	_, err = f.NewRecordSetsClient().CreateOrUpdate(ctx, t.group, t.zone, t.relative, t.typ, armdns.RecordSet{Properties: props}, nil)
	if notFound(err) {
		// The zone the job made is gone: deleted outside Groundwork. Retrying cannot bring it
		// back; the user decides whether to make it again.
		return fault.UserAction(fmt.Errorf("record %s %s: %w", r.Type, r.Name, err), "ZoneNotFound",
			fmt.Sprintf("The DNS zone %s no longer exists in resource group %s (was it deleted outside Groundwork?): retry the job to make its zone again.", t.zone, t.group),
			d.C.PortalURL(zoneID))
	}
	if err != nil {
		return d.C.Classify(fmt.Errorf("record %s %s: %w", r.Type, r.Name, err))
	}
	return nil
}

// DeleteRecord implements dnszone.Driver: it deletes the record set if it still holds r's
// values. A record set that is gone, in a zone that is gone, or that was changed since (it is
// someone else's now) is left as it is, as Route 53 refuses a DELETE whose values differ.
func (d DNSZoneDriver) DeleteRecord(ctx context.Context, zoneID string, r dnszone.Record) error {
	t, err := d.target(zoneID, r)
	if err != nil {
		return err
	}
	want, err := recordProperties(t.typ, r)
	if err != nil {
		return err
	}
	f, err := d.factory()
	if err != nil {
		return err
	}
	sets := f.NewRecordSetsClient()
	got, err := sets.Get(ctx, t.group, t.zone, t.relative, t.typ, nil)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return d.C.Classify(err)
	}
	if !slices.Equal(recordValues(t.typ, got.Properties), recordValues(t.typ, want)) {
		return nil
	}
	// If-Match: a change made between the read and the delete keeps the record set.
	_, err = sets.Delete(ctx, t.group, t.zone, t.relative, t.typ, &armdns.RecordSetsClientDeleteOptions{IfMatch: got.Etag})
	if err != nil && !notFound(err) && status(err) != http.StatusPreconditionFailed {
		return d.C.Classify(err)
	}
	return nil
}

// recordProperties is r as Azure's record set of type typ.
func recordProperties(typ armdns.RecordType, r dnszone.Record) (*armdns.RecordSetProperties, error) {
	ttl := r.TTL
	if ttl == 0 {
		ttl = 300
	}
	p := &armdns.RecordSetProperties{TTL: to.Ptr(ttl), Metadata: map[string]*string{TagManagedBy: to.Ptr(managedBy)}}
	bad := func(v, want string) error {
		return fault.UserAction(fmt.Errorf("record %s %s: value %q is not %s", r.Type, r.Name, v, want), "InvalidRecordValue",
			"Give each "+r.Type+" record value as "+want+".", "")
	}
	for _, v := range r.Values {
		switch typ {
		case armdns.RecordTypeA:
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is4() {
				return nil, bad(v, "an IPv4 address")
			}
			p.ARecords = append(p.ARecords, &armdns.ARecord{IPv4Address: to.Ptr(a.String())})
		case armdns.RecordTypeAAAA:
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is6() || a.Is4In6() {
				return nil, bad(v, "an IPv6 address")
			}
			p.AaaaRecords = append(p.AaaaRecords, &armdns.AaaaRecord{IPv6Address: to.Ptr(a.String())})
		case armdns.RecordTypeCNAME:
			if len(r.Values) != 1 {
				return nil, fault.UserAction(fmt.Errorf("record CNAME %s has %d values", r.Name, len(r.Values)), "InvalidRecordValue",
					"A CNAME record has exactly one value: the name it points to.", "")
			}
			p.CnameRecord = &armdns.CnameRecord{Cname: to.Ptr(v)}
		case armdns.RecordTypeTXT:
			p.TxtRecords = append(p.TxtRecords, &armdns.TxtRecord{Value: txtStrings(v)})
		case armdns.RecordTypeMX:
			pref, host, ok := strings.Cut(strings.TrimSpace(v), " ")
			n, err := strconv.ParseInt(pref, 10, 32)
			if !ok || err != nil || n < 0 || n > 65535 {
				return nil, bad(v, "a preference and a host, such as \"10 mail.example.com\"")
			}
			p.MxRecords = append(p.MxRecords, &armdns.MxRecord{Preference: to.Ptr(int32(n)), Exchange: to.Ptr(strings.TrimSpace(host))})
		case armdns.RecordTypeNS:
			p.NsRecords = append(p.NsRecords, &armdns.NsRecord{Nsdname: to.Ptr(v)})
		default:
			return nil, fault.UserAction(fmt.Errorf("record %s %s: type %s", r.Type, r.Name, r.Type), "UnsupportedRecordType",
				"Azure DNS records of this module are A, AAAA, CNAME, TXT, MX and NS.", "")
		}
	}
	return p, nil
}

// txtStrings is one TXT value as Azure takes it: unquoted (a value written for Route 53 comes
// quoted), in strings of at most 255 characters, which DNS joins back.
func txtStrings(v string) []*string {
	if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
		v = v[1 : len(v)-1]
	}
	var out []*string
	for len(v) > 255 {
		out = append(out, to.Ptr(v[:255]))
		v = v[255:]
	}
	return append(out, to.Ptr(v))
}

// recordValues are a record set's values of type typ, sorted, to compare two sets.
func recordValues(typ armdns.RecordType, p *armdns.RecordSetProperties) []string {
	if p == nil {
		return nil
	}
	var out []string
	add := func(s *string) {
		if s != nil {
			out = append(out, strings.ToLower(strings.TrimSuffix(*s, ".")))
		}
	}
	switch typ {
	case armdns.RecordTypeA:
		for _, r := range p.ARecords {
			add(r.IPv4Address)
		}
	case armdns.RecordTypeAAAA:
		for _, r := range p.AaaaRecords {
			if r.IPv6Address != nil {
				if a, err := netip.ParseAddr(*r.IPv6Address); err == nil {
					add(to.Ptr(a.String()))
				}
			}
		}
	case armdns.RecordTypeCNAME:
		if p.CnameRecord != nil {
			add(p.CnameRecord.Cname)
		}
	case armdns.RecordTypeTXT:
		for _, r := range p.TxtRecords {
			var b strings.Builder
			for _, s := range r.Value {
				if s != nil {
					b.WriteString(*s)
				}
			}
			out = append(out, b.String())
		}
	case armdns.RecordTypeMX:
		for _, r := range p.MxRecords {
			if r.Preference != nil && r.Exchange != nil {
				add(to.Ptr(strconv.Itoa(int(*r.Preference)) + " " + *r.Exchange))
			}
		}
	case armdns.RecordTypeNS:
		for _, r := range p.NsRecords {
			add(r.Nsdname)
		}
	}
	slices.Sort(out)
	return out
}

// status is the HTTP status of Azure's answer in err, or 0.
func status(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
