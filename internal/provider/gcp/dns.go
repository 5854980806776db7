package gcp

import (
	"context"
	"fmt"
	"strings"

	dns "google.golang.org/api/dns/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/dnszone"
)

// roleZone is the label role of a job's DNS zone.
const roleZone = "dns-zone"

// DNSZoneDriver makes a job's Cloud DNS managed zone: public, or private and visible from
// the VPC network the config names. Cloud DNS answers zone and record calls at once (no
// operation to poll).
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

func (d DNSZoneDriver) service(ctx context.Context) (*dns.Service, error) {
	s, err := dns.NewService(ctx, d.C.Options(ServiceDNS)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

// zoneID is the zone's id as the step records it.
func (d DNSZoneDriver) zoneID(zone string) string {
	return "projects/" + d.C.ProjectID + "/managedZones/" + zone
}

// zoneOf reads a recorded zone id back; only the space's project's zones are accepted.
func (d DNSZoneDriver) zoneOf(id string) (string, error) {
	zone, ok := strings.CutPrefix(id, "projects/"+d.C.ProjectID+"/managedZones/")
	if !ok || zone == "" || strings.Contains(zone, "/") {
		return "", fault.UserAction(fmt.Errorf("zone %q is not a managed zone of project %s", id, d.C.ProjectID), "ZoneNotFound",
			"Name a Cloud DNS zone as projects/<project>/managedZones/<zone> in the space's project.", "")
	}
	return zone, nil
}

// networkURL is the self link of a compute resource name (projects/p/global/networks/n, as
// ids are recorded), or the self link itself.
func selfLink(id string) string {
	if strings.HasPrefix(id, "https://") {
		return id
	}
	return "https://www.googleapis.com/compute/v1/" + strings.TrimPrefix(id, "/")
}

// EnsureZone implements dnszone.Driver.
func (d DNSZoneDriver) EnsureZone(ctx context.Context, j *job.Job, cfg dnszone.Config) (dnszone.Zone, error) {
	s, err := d.service(ctx)
	if err != nil {
		return dnszone.Zone{}, err
	}
	zone := name(j, "zone")
	domain := strings.TrimSuffix(cfg.Name, ".")
	var got *dns.ManagedZone
	r := Resource{
		Get: func(ctx context.Context) (State, error) {
			z, err := s.ManagedZones.Get(d.C.ProjectID, zone).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			got = z
			return State{Found: true, Ours: owns(j, z.Labels), Ready: true}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			mz := &dns.ManagedZone{Name: zone, DnsName: domain + ".", Description: description(j, roleZone),
				Labels: labels(j, roleZone), Visibility: "public"}
			if cfg.Private {
				mz.Visibility = "private"
				mz.PrivateVisibilityConfig = &dns.ManagedZonePrivateVisibilityConfig{
					Networks: []*dns.ManagedZonePrivateVisibilityConfigNetwork{{NetworkUrl: selfLink(cfg.VPCID)}}}
			}
			z, err := s.ManagedZones.Create(d.C.ProjectID, mz).Context(ctx).Do()
			got = z
			return "", err
		},
	}
	if _, err := d.C.converge(ctx, Ops{}, "create zone", r); err != nil {
		return dnszone.Zone{}, err
	}
	if got == nil {
		return dnszone.Zone{}, fault.Transientf("zone %s is not readable yet", zone)
	}
	if got.DnsName != domain+"." {
		return dnszone.Zone{}, fault.UserAction(fmt.Errorf("zone %s serves %s, not %s", zone, got.DnsName, domain), "ZoneChanged",
			"The job's zone serves another domain; delete the job and create it again for the new domain.", "")
	}
	return dnszone.Zone{ID: d.zoneID(zone), Name: domain, NameServers: got.NameServers}, nil
}

// DeleteZone implements dnszone.Driver: the zone's own record sets go first (Cloud DNS
// deletes only a zone that holds nothing but its SOA and NS), then the zone.
func (d DNSZoneDriver) DeleteZone(ctx context.Context, j *job.Job, _ string) error {
	s, err := d.service(ctx)
	if err != nil {
		return err
	}
	zone := name(j, "zone")
	r := Resource{
		Get: func(ctx context.Context) (State, error) {
			z, err := s.ManagedZones.Get(d.C.ProjectID, zone).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Ours: owns(j, z.Labels), Ready: true}, nil
		},
		Delete: func(ctx context.Context) (string, error) {
			if err := d.emptyZone(ctx, s, zone); err != nil {
				return "", err
			}
			return "", s.ManagedZones.Delete(d.C.ProjectID, zone).Context(ctx).Do()
		},
	}
	_, err = d.C.remove(ctx, Ops{}, "delete zone", r)
	return err
}

func (d DNSZoneDriver) emptyZone(ctx context.Context, s *dns.Service, zone string) error {
	return s.ResourceRecordSets.List(d.C.ProjectID, zone).Pages(ctx, func(page *dns.ResourceRecordSetsListResponse) error {
		for _, rr := range page.Rrsets {
			if rr.Type == "SOA" || rr.Type == "NS" {
				continue
			}
			if _, err := s.ResourceRecordSets.Delete(d.C.ProjectID, zone, rr.Name, rr.Type).Context(ctx).Do(); err != nil && !notFound(err) {
				return err
			}
		}
		return nil
	})
}

func fqdn(n string) string { return strings.TrimSuffix(n, ".") + "." }

// UpsertRecord implements dnszone.Driver: a record set is created, or patched when one of
// its name and type is there.
func (d DNSZoneDriver) UpsertRecord(ctx context.Context, zoneID string, rec dnszone.Record) error {
	zone, err := d.zoneOf(zoneID)
	if err != nil {
		return err
	}
	s, err := d.service(ctx)
	if err != nil {
		return err
	}
	ttl := rec.TTL
	if ttl <= 0 {
		ttl = 300
	}
	want := &dns.ResourceRecordSet{Name: fqdn(rec.Name), Type: strings.ToUpper(rec.Type), Ttl: ttl, Rrdatas: rec.Values}
	if want.Type == "CNAME" || want.Type == "MX" || want.Type == "NS" {
		want.Rrdatas = make([]string, len(rec.Values))
		for i, v := range rec.Values {
			want.Rrdatas[i] = fqdn(v)
		}
	}
	_, err = s.ResourceRecordSets.Get(d.C.ProjectID, zone, want.Name, want.Type).Context(ctx).Do()
	switch {
	case notFound(err):
		if _, err := s.ResourceRecordSets.Create(d.C.ProjectID, zone, want).Context(ctx).Do(); err != nil {
			if conflict(err) {
				return fault.Transientf("record %s %s was created meanwhile", want.Name, want.Type)
			}
			return d.zoneGone(zoneID, err)
		}
		return nil
	case err != nil:
		return d.zoneGone(zoneID, err)
	}
	if _, err := s.ResourceRecordSets.Patch(d.C.ProjectID, zone, want.Name, want.Type, want).Context(ctx).Do(); err != nil {
		return d.C.Classify(err)
	}
	return nil
}

// zoneGone gives a 404 on a zone's records (the zone is not there) its fix.
func (d DNSZoneDriver) zoneGone(zoneID string, err error) error {
	if notFound(err) {
		return fault.UserAction(fmt.Errorf("zone %s: %w", zoneID, err), "ZoneNotFound",
			"The zone is not in the space's project; create it (a dns_zone job) or name one that exists.", d.C.ConsoleURL("net-services/dns/zones"))
	}
	return d.C.Classify(err)
}

// DeleteRecord implements dnszone.Driver; a record (or zone) already gone is done.
func (d DNSZoneDriver) DeleteRecord(ctx context.Context, zoneID string, rec dnszone.Record) error {
	zone, err := d.zoneOf(zoneID)
	if err != nil {
		return err
	}
	s, err := d.service(ctx)
	if err != nil {
		return err
	}
	_, err = s.ResourceRecordSets.Delete(d.C.ProjectID, zone, fqdn(rec.Name), strings.ToUpper(rec.Type)).Context(ctx).Do()
	if err != nil && !notFound(err) {
		return d.C.Classify(err)
	}
	return nil
}
