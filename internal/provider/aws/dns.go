package aws

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/route53"
	r53types "github.com/aws/aws-sdk-go-v2/service/route53/types"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// ZoneSpec asks for a Route 53 hosted zone; a private zone is bound to VPCID.
type ZoneSpec struct {
	Tags    Tags
	Name    string
	Private bool
	VPCID   string
}

// Zone is a hosted zone.
type Zone struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	NameServers []string `json:"nameServers,omitempty"`
}

// Record is one DNS record set. Alias records point at a load balancer.
type Record struct {
	Name   string
	Type   string // A, CNAME, TXT, ...
	TTL    int64
	Values []string
	// AliasDNSName and AliasZoneID make an alias record (an ALB's DNS name and canonical zone).
	AliasDNSName string
	AliasZoneID  string
}

// callerRef is Route 53's idempotency key for a zone: a retried create with the same reference
// fails with HostedZoneAlreadyExists instead of making a second zone.
func callerRef(t Tags) string { return t.JobID + "-" + t.Role }

func fqdn(name string) string {
	if strings.HasSuffix(name, ".") {
		return name
	}
	return name + "."
}

// EnsureZone creates the zone or finds the one this job made earlier.
func (p *Provider) EnsureZone(ctx context.Context, s ZoneSpec) (Zone, error) {
	if z, ok, err := p.findZone(ctx, s.Tags, s.Name); err != nil || ok {
		if err == nil {
			err = p.tagZone(ctx, s.Tags, z.ID)
		}
		return z, err
	}
	in := &route53.CreateHostedZoneInput{Name: &s.Name, CallerReference: ptr(callerRef(s.Tags))}
	if s.Private {
		in.VPC = &r53types.VPC{VPCId: &s.VPCID, VPCRegion: r53types.VPCRegion(p.region)}
		in.HostedZoneConfig = &r53types.HostedZoneConfig{PrivateZone: true}
	}
	find := func(ctx context.Context) (Zone, bool, error) { return p.findZone(ctx, s.Tags, s.Name) }
	// The caller reference is Route 53's key (a repeat answers HostedZoneAlreadyExists), and
	// the look-up by it runs before any repeat, for emulators that do not honour it.
	z, err := createOnce(ctx, p.r53.Options().Retryer, find, func(ctx context.Context) (Zone, error) {
		out, err := p.r53.CreateHostedZone(ctx, in, r53NoRetry)
		if err != nil {
			return Zone{}, err
		}
		z := Zone{ID: zoneID(deref(out.HostedZone.Id)), Name: deref(out.HostedZone.Name)}
		if out.DelegationSet != nil {
			z.NameServers = out.DelegationSet.NameServers
		}
		return z, nil
	})
	if err != nil {
		// HostedZoneAlreadyExists names this job's caller reference, so the zone is this job's
		// and only not visible yet: transient, the re-run adopts it.
		return Zone{}, p.classify(err, false)
	}
	return z, p.tagZone(ctx, s.Tags, z.ID)
}

// tagZone puts the job's tags on the zone; Route 53 takes no tags in the create call, so a
// zone whose create answer was lost is tagged when the look-up adopts it.
func (p *Provider) tagZone(ctx context.Context, t Tags, id string) error {
	m := t.Map()
	tags := make([]r53types.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		tags = append(tags, r53types.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	if _, err := p.r53.ChangeTagsForResource(ctx, &route53.ChangeTagsForResourceInput{
		ResourceId: &id, ResourceType: r53types.TagResourceTypeHostedzone, AddTags: tags,
	}); err != nil {
		return p.classify(err, true)
	}
	return nil
}

// findZone looks for the zone this job created by name and caller reference.
func (p *Provider) findZone(ctx context.Context, t Tags, name string) (Zone, bool, error) {
	out, err := p.r53.ListHostedZonesByName(ctx, &route53.ListHostedZonesByNameInput{DNSName: &name})
	if err != nil {
		return Zone{}, false, p.classify(err, false)
	}
	for _, hz := range out.HostedZones {
		if deref(hz.Name) != fqdn(name) || deref(hz.CallerReference) != callerRef(t) {
			continue
		}
		id := zoneID(deref(hz.Id))
		z := Zone{ID: id, Name: deref(hz.Name)}
		got, err := p.r53.GetHostedZone(ctx, &route53.GetHostedZoneInput{Id: &id})
		if err != nil {
			return z, false, p.classify(err, true)
		}
		if got.DelegationSet != nil {
			z.NameServers = got.DelegationSet.NameServers
		}
		return z, true, nil
	}
	return Zone{}, false, nil
}

func zoneID(id string) string { return strings.TrimPrefix(id, "/hostedzone/") }

// UpsertRecord sets a record (UPSERT is idempotent by itself).
func (p *Provider) UpsertRecord(ctx context.Context, zone string, r Record) error {
	return p.changeRecord(ctx, zone, r53types.ChangeActionUpsert, r)
}

// DeleteRecord removes a record; a missing one is success.
func (p *Provider) DeleteRecord(ctx context.Context, zone string, r Record) error {
	err := p.changeRecord(ctx, zone, r53types.ChangeActionDelete, r)
	if isCode(err, "InvalidChangeBatch", "NoSuchHostedZone") {
		return nil
	}
	return err
}

func (p *Provider) changeRecord(ctx context.Context, zone string, action r53types.ChangeAction, r Record) error {
	rrs := &r53types.ResourceRecordSet{Name: ptr(fqdn(r.Name)), Type: r53types.RRType(r.Type)}
	if r.AliasDNSName != "" {
		rrs.AliasTarget = &r53types.AliasTarget{DNSName: &r.AliasDNSName, HostedZoneId: &r.AliasZoneID, EvaluateTargetHealth: true}
	} else {
		ttl := r.TTL
		if ttl == 0 {
			ttl = 300
		}
		rrs.TTL = &ttl
		for _, v := range r.Values {
			rrs.ResourceRecords = append(rrs.ResourceRecords, r53types.ResourceRecord{Value: ptr(v)})
		}
	}
	_, err := p.r53.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{
		HostedZoneId: &zone,
		ChangeBatch:  &r53types.ChangeBatch{Changes: []r53types.Change{{Action: action, ResourceRecordSet: rrs}}},
	})
	if err != nil {
		if action == r53types.ChangeActionDelete {
			return err
		}
		if isCode(err, "NoSuchHostedZone") {
			// The zone the job made (or was given) is gone: deleted outside Groundwork. Retrying
			// cannot bring it back; the user decides whether to recreate it.
			return fault.UserAction(err, "NoSuchHostedZone", fmt.Sprintf("The hosted zone %s no longer exists in the account (was it deleted outside Groundwork?): retry the job to recreate its zone, or point the record at an existing zone.", zone), "")
		}
		return p.classify(err, false)
	}
	return nil
}

// DeleteZone removes the job's zone and every record in it but the apex SOA and NS, which Route
// 53 owns. A missing zone is success.
func (p *Provider) DeleteZone(ctx context.Context, t Tags, name string) error {
	z, ok, err := p.findZone(ctx, t, name)
	if err != nil || !ok {
		return err
	}
	recs, err := p.r53.ListResourceRecordSets(ctx, &route53.ListResourceRecordSetsInput{HostedZoneId: &z.ID})
	if err != nil {
		return p.classify(err, false)
	}
	var changes []r53types.Change
	for _, rr := range recs.ResourceRecordSets {
		if deref(rr.Name) == z.Name && (rr.Type == r53types.RRTypeSoa || rr.Type == r53types.RRTypeNs) {
			continue
		}
		changes = append(changes, r53types.Change{Action: r53types.ChangeActionDelete, ResourceRecordSet: &rr})
	}
	if len(changes) > 0 {
		if _, err := p.r53.ChangeResourceRecordSets(ctx, &route53.ChangeResourceRecordSetsInput{
			HostedZoneId: &z.ID, ChangeBatch: &r53types.ChangeBatch{Changes: changes},
		}); err != nil {
			if isCode(err, "InvalidChangeBatch") {
				// A repeat of a batch whose answer was lost names records already gone: the
				// step's re-run lists again.
				return withCode(fault.Transient(err), "InvalidChangeBatch")
			}
			return p.classify(err, false)
		}
	}
	if _, err := p.r53.DeleteHostedZone(ctx, &route53.DeleteHostedZoneInput{Id: &z.ID}); err != nil && !gone(err) {
		return p.classify(err, false)
	}
	return nil
}

// PeeringSpec asks for a VPC peering connection from VPCID to PeerVPCID (same account and
// region unless PeerOwnerID / PeerRegion say otherwise; then the peer must accept it).
type PeeringSpec struct {
	Tags        Tags
	VPCID       string
	PeerVPCID   string
	PeerOwnerID string
	PeerRegion  string
}

// EnsurePeering creates (or finds) the peering connection and accepts it when the peer VPC is
// in the same account and region.
func (p *Provider) EnsurePeering(ctx context.Context, s PeeringSpec) (string, error) {
	out, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{Filters: append(s.Tags.ec2Filters(),
		ec2types.Filter{Name: ptr("status-code"), Values: []string{"pending-acceptance", "active", "provisioning", "initiating-request"}})})
	if err != nil {
		return "", p.classify(err, false)
	}
	var pc ec2types.VpcPeeringConnection
	found := false
	for _, c := range out.VpcPeeringConnections {
		if c.AccepterVpcInfo != nil && deref(c.AccepterVpcInfo.VpcId) != s.PeerVPCID {
			// The job's connection to the peer it had before a config update: a connection
			// never changes its peer, so it goes, and its routes with it.
			if err := p.deletePeering(ctx, s.Tags, c); err != nil {
				return "", err
			}
			continue
		}
		pc, found = c, true
	}
	if !found {
		in := &ec2.CreateVpcPeeringConnectionInput{VpcId: &s.VPCID, PeerVpcId: &s.PeerVPCID, TagSpecifications: s.Tags.ec2Spec(ec2types.ResourceTypeVpcPeeringConnection)}
		if s.PeerOwnerID != "" {
			in.PeerOwnerId = &s.PeerOwnerID
		}
		if s.PeerRegion != "" {
			in.PeerRegion = &s.PeerRegion
		}
		find := func(ctx context.Context) (ec2types.VpcPeeringConnection, bool, error) {
			out, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{Filters: append(s.Tags.ec2Filters(),
				ec2types.Filter{Name: ptr("status-code"), Values: []string{"pending-acceptance", "active", "provisioning", "initiating-request"}})})
			if err != nil || len(out.VpcPeeringConnections) == 0 {
				return ec2types.VpcPeeringConnection{}, false, err
			}
			return out.VpcPeeringConnections[0], true, nil
		}
		// No idempotency key: the tags in the same call are what a look-up finds.
		pc, err = createOnce(ctx, p.ec2.Options().Retryer, find, func(ctx context.Context) (ec2types.VpcPeeringConnection, error) {
			created, err := p.ec2.CreateVpcPeeringConnection(ctx, in, ec2NoRetry)
			if err != nil {
				return ec2types.VpcPeeringConnection{}, err
			}
			return *created.VpcPeeringConnection, nil
		})
		if err != nil {
			return "", p.classify(err, false)
		}
	}
	id := deref(pc.VpcPeeringConnectionId)
	sameSide := s.PeerOwnerID == "" && (s.PeerRegion == "" || s.PeerRegion == p.region)
	if sameSide && pc.Status != nil && pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodeInitiatingRequest {
		// A new connection answers initiating-request; it takes its accept once it is
		// pending-acceptance, so it is read again (and the step retried while it initiates).
		again, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{VpcPeeringConnectionIds: []string{id}})
		if err != nil {
			return id, p.classify(err, true)
		}
		if len(again.VpcPeeringConnections) > 0 {
			pc = again.VpcPeeringConnections[0]
		}
		if pc.Status != nil && pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodeInitiatingRequest {
			return id, fault.Transientf("peering connection %s is still initiating", id)
		}
	}
	if sameSide && pc.Status != nil && pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodePendingAcceptance {
		// A repeated accept of an accepted connection is refused as a state transition.
		if _, err := p.ec2.AcceptVpcPeeringConnection(ctx, &ec2.AcceptVpcPeeringConnectionInput{VpcPeeringConnectionId: &id}); err != nil && !isCode(err, "InvalidStateTransition") {
			return id, p.classify(err, true)
		}
	}
	if err := p.ensurePeeringRoutes(ctx, s, pc); err != nil {
		return id, err
	}
	return id, nil
}

// DeletePeering removes the job's peering connections.
func (p *Provider) DeletePeering(ctx context.Context, t Tags) error {
	out, err := p.ec2.DescribeVpcPeeringConnections(ctx, &ec2.DescribeVpcPeeringConnectionsInput{Filters: t.ec2JobFilter()})
	if err != nil {
		return p.classify(err, false)
	}
	for _, pc := range out.VpcPeeringConnections {
		if pc.Status != nil && (pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodeDeleted || pc.Status.Code == ec2types.VpcPeeringConnectionStateReasonCodeDeleting) {
			continue
		}
		if err := p.deletePeering(ctx, t, pc); err != nil {
			return err
		}
	}
	return nil
}
