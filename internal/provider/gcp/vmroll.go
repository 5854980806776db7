package gcp

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	compute "google.golang.org/api/compute/v1"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/vmpool"
)

// A pool's instance templates. Compute Engine's templates cannot change, so each template
// change of the config is a template of its own, named after the job and a hash of what the
// template carries from the config: the same config names the same template, so a step run
// again after a crash finds the template it made rather than making a second one.

var _ vmpool.Roller = VMPoolDriver{}

// templateSpec is what of the config a template carries; its hash names the template.
func templateSpec(c vmpool.Config) string {
	image := c.ImageID
	if image == "" {
		image = defaultImage
	}
	return strings.Join([]string{"v1", c.InstanceType, image, strconv.FormatBool(c.Bare)}, "\x00")
}

// templateName is the name of the template for c, and the version number the pool records
// for it (the hash's first four bytes: a template has no number of its own on GCP).
func templateName(j *job.Job, c vmpool.Config) (string, int64) {
	h := sha256.Sum256([]byte(templateSpec(c)))
	return name(j, roleTemplate+"-"+hex.EncodeToString(h[:4])), int64(binary.BigEndian.Uint32(h[:4]))
}

// jobTemplates are the names of the job's instance templates: its name prefix and its
// description's mark (a template made before templates were versioned is named without a
// hash, and is found the same way).
func (d VMPoolDriver) jobTemplates(ctx context.Context, s *compute.Service, j *job.Job) ([]string, error) {
	prefix := name(j, roleTemplate)
	var out []string
	err := s.InstanceTemplates.List(d.C.ProjectID).Pages(ctx, func(page *compute.InstanceTemplateList) error {
		for _, t := range page.Items {
			if strings.HasPrefix(t.Name, prefix) && ownsDescription(j, t.Description) {
				out = append(out, t.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, d.C.Classify(err)
	}
	sort.Strings(out)
	return out, nil
}

// deleteOldTemplates deletes the job's templates other than keep, which nothing uses once a
// roll is over; done when none is left.
func (d VMPoolDriver) deleteOldTemplates(ctx context.Context, s *compute.Service, j *job.Job, keep string) (bool, error) {
	names, err := d.jobTemplates(ctx, s, j)
	if err != nil {
		return false, err
	}
	var rs []keyed
	for _, n := range names {
		if n == keep {
			continue
		}
		t, err := d.template(s, j, n, vmpool.Config{}, vmpool.Network{}, "")
		if err != nil {
			return false, err
		}
		rs = append(rs, t)
	}
	return d.removeAll(ctx, rs...)
}

// slotOf is the slot of a fixed pool's instance by its name: <vm>-<slot> as the VMs step
// makes it, <vm>-<slot>-<template hash> as a roll does.
func slotOf(j *job.Job, n string) (int, bool) {
	rest, ok := strings.CutPrefix(n, name(j, roleVMs)+"-")
	if !ok {
		return 0, false
	}
	head, _, _ := strings.Cut(rest, "-")
	i, err := strconv.Atoi(head)
	return i, err == nil && i >= 0
}

// poolInstances are a fixed pool's instances, by slot, each slot's sorted by name; read from
// the zone's list (and its every page), marked as the job's.
func (d VMPoolDriver) poolInstances(ctx context.Context, s *compute.Service, j *job.Job) (map[int][]*compute.Instance, error) {
	out := map[int][]*compute.Instance{}
	err := s.Instances.List(d.C.ProjectID, d.C.Zone()).Pages(ctx, func(page *compute.InstanceList) error {
		for _, in := range page.Items {
			if i, ok := slotOf(j, in.Name); ok && ownsDescription(j, in.Description) {
				out[i] = append(out[i], in)
			}
		}
		return nil
	})
	if err != nil {
		return nil, d.C.Classify(err)
	}
	for _, l := range out {
		sort.Slice(l, func(a, b int) bool { return l[a].Name < l[b].Name })
	}
	return out, nil
}

// instanceNamed is a fixed pool's instance of the given name, made from tmpl.
func (d VMPoolDriver) instanceNamed(s *compute.Service, j *job.Job, iname, tmpl string) keyed {
	p, zone := d.C.ProjectID, d.C.Zone()
	return keyed{"vm " + iname, d.resource(s, j, "vm "+iname, "instance "+iname,
		func(ctx context.Context) (string, error) {
			v, err := s.Instances.Get(p, zone, iname).Context(ctx).Do()
			if err != nil {
				return "", err
			}
			return v.Description, nil
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Instances.Insert(p, zone, &compute.Instance{Name: iname, Description: description(j, roleVMs)}).
				SourceInstanceTemplate(selfLink(tmpl)).RequestId(rid).Context(ctx).Do()
		}, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.Instances.Delete(p, zone, iname).RequestId(rid).Context(ctx).Do()
		})}
}

// groupHealth is the health the backend service reports of each instance of group, by
// instance self link; an instance not in the group is not in the map.
func (d VMPoolDriver) groupHealth(ctx context.Context, s *compute.Service, j *job.Job, group string) (map[string]string, error) {
	h, err := s.BackendServices.GetHealth(d.C.ProjectID, name(j, roleBackend), &compute.ResourceGroupReference{Group: group}).Context(ctx).Do()
	if err != nil {
		return nil, d.C.Classify(err)
	}
	out := map[string]string{}
	for _, st := range h.HealthStatus {
		out[selfLink(strings.TrimPrefix(st.Instance, "https://www.googleapis.com/compute/v1/"))] = st.HealthState
	}
	return out, nil
}

// bootstrapped reports whether the instance's cloud-init set the bootstrap guest attribute.
func (d VMPoolDriver) bootstrapped(ctx context.Context, in *compute.Instance) (bool, error) {
	vms, all, err := d.CheckBootstrap(ctx, []vmpool.VM{d.vmOf(in)})
	return all && len(vms) == 1, err
}

// RollStep implements vmpool.Roller: the pool is moved onto the template of its config, one
// cloud change per call, each call reading where the roll stands from the cloud. An asg pool
// is rolled by the managed group itself (a proactive update, one instance surged at a time,
// none taken away before its replacement runs); a fixed pool slot by slot: a new instance on
// the template, running and bootstrapped, healthy in the backend service when the pool is
// behind the load balancer (and only then put in its instance group), before the slot's old
// instance leaves the group and is deleted. Once every instance is on the template, the
// job's other templates are deleted.
func (d VMPoolDriver) RollStep(ctx context.Context, j *job.Job, c vmpool.Config, targetGroup string) (vmpool.RollStatus, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return vmpool.RollStatus{}, err
	}
	tname, version := templateName(j, c)
	if _, err := s.InstanceTemplates.Get(d.C.ProjectID, tname).Context(ctx).Do(); err != nil {
		if notFound(err) {
			return vmpool.RollStatus{}, fault.UserAction(fmt.Errorf("the pool has no instance template %s", tname), "NoLaunchTemplate",
				"The pool's instance template for this config is gone; update the config again to make it.", "")
		}
		return vmpool.RollStatus{}, d.C.Classify(err)
	}
	tmpl := selfLink(d.global("instanceTemplates", tname))
	var st vmpool.RollStatus
	if c.Mode == "asg" {
		st, err = d.rollMIG(ctx, s, j, c, tmpl, targetGroup != "")
	} else {
		st, err = d.rollFixed(ctx, s, j, c, tmpl, targetGroup != "")
	}
	st.Version = version
	if err != nil || !st.Done {
		return st, err
	}
	if gone, err := d.deleteOldTemplates(ctx, s, j, tname); err != nil || !gone {
		st.Done, st.Waiting = false, "deleting the pool's older instance templates"
		return st, err
	}
	// Every instance passed the roll's check (running, bootstrapped or healthy).
	vms, err := d.EnsureVMs(ctx, j, c, vmpool.Network{}, vmpool.LaunchTemplate{ID: d.global("instanceTemplates", tname)})
	for i := range vms {
		if vms[i].State == "bootstrap" {
			vms[i].State = "ready"
		}
	}
	st.VMs = vms
	return st, err
}

// rollFixed advances a fixed pool's roll by one change.
func (d VMPoolDriver) rollFixed(ctx context.Context, s *compute.Service, j *job.Job, c vmpool.Config, tmpl string, lb bool) (vmpool.RollStatus, error) {
	st := vmpool.RollStatus{Total: int(c.Desired)}
	bySlot, err := d.poolInstances(ctx, s, j)
	if err != nil {
		return st, err
	}
	onTemplate := func(in *compute.Instance) bool { return templateOf(in) == lastSegment(tmpl) }
	pending := -1
	for i := range int(c.Desired) {
		old := len(bySlot[i]) == 0
		for _, in := range bySlot[i] {
			old = old || !onTemplate(in)
		}
		if !old {
			st.Replaced++
		} else if pending < 0 {
			pending = i
		}
	}
	if pending < 0 {
		st.Done = true
		return st, nil
	}
	var olds, news []*compute.Instance
	for _, in := range bySlot[pending] {
		if onTemplate(in) {
			news = append(news, in)
		} else {
			olds = append(olds, in)
		}
	}
	if len(news) == 0 {
		// The new instance's name is the slot's and the template's: a call after a crash
		// finds it (or Google answers its insert's requestId) instead of making another.
		iname := fmt.Sprintf("%s-%d-%s", name(j, roleVMs), pending, strings.TrimPrefix(lastSegment(tmpl), name(j, roleTemplate)+"-"))
		r := d.instanceNamed(s, j, iname, strings.TrimPrefix(tmpl, "https://www.googleapis.com/compute/v1/"))
		if _, err := d.C.converge(ctx, Ops{}, r.key, r.r); err != nil {
			return st, err
		}
		st.Waiting = "made " + iname + " on the new template"
		return st, nil
	}
	n := news[0]
	if n.Status != "RUNNING" {
		st.Waiting = "waiting for " + n.Name + " to run"
		return st, nil
	}
	if c.WaitsForBootstrap() {
		ok, err := d.bootstrapped(ctx, n)
		if err != nil || !ok {
			st.Waiting = "waiting for the bootstrap guest attribute of " + n.Name
			return st, err
		}
	}
	var health map[string]string
	group := d.poolGroup(j, c)
	if lb {
		if health, err = d.groupHealth(ctx, s, j, group); err != nil {
			return st, err
		}
		if _, member := health[selfLink(n.SelfLink)]; !member {
			if err := d.groupMembers(ctx, s, j, n, true); err != nil {
				return st, err
			}
			st.Waiting = "added " + n.Name + " to the pool's instance group"
			return st, nil
		}
		if health[selfLink(n.SelfLink)] != "HEALTHY" {
			st.Waiting = "waiting for " + n.Name + " to be healthy in the backend service"
			return st, nil
		}
	}
	if len(olds) == 0 {
		// A slot with no instance at all (one deleted by hand) got its new one.
		st.Replaced++
		st.Waiting = n.Name + " fills its slot"
		return st, nil
	}
	o := olds[0]
	if _, member := health[selfLink(o.SelfLink)]; lb && member {
		// Out of the backend first: the load balancer stops sending to it (draining its
		// connections) before it is deleted.
		if err := d.groupMembers(ctx, s, j, o, false); err != nil {
			return st, err
		}
		st.Waiting = "took " + o.Name + " out of the pool's instance group"
		return st, nil
	}
	r := d.instanceNamed(s, j, o.Name, "")
	if _, err := d.C.remove(ctx, Ops{}, r.key, r.r); err != nil {
		return st, err
	}
	if len(olds) == 1 {
		st.Replaced++
	}
	st.Waiting = "deleting " + o.Name
	return st, nil
}

// groupMembers adds in to the fixed pool's instance group, or takes it out, and waits for
// the change: the next call reads the group's members from the backend's health again.
func (d VMPoolDriver) groupMembers(ctx context.Context, s *compute.Service, j *job.Job, in *compute.Instance, add bool) error {
	p, zone, g := d.C.ProjectID, d.C.Zone(), name(j, roleGroup)
	refs := []*compute.InstanceReference{{Instance: selfLink(in.SelfLink)}}
	verb := "remove"
	if add {
		verb = "add"
	}
	op, err := sendOnce(ctx, j, verb+" "+in.Name+" group", func(ctx context.Context, rid string) (*compute.Operation, error) {
		if add {
			return s.InstanceGroups.AddInstances(p, zone, g, &compute.InstanceGroupsAddInstancesRequest{Instances: refs}).RequestId(rid).Context(ctx).Do()
		}
		return s.InstanceGroups.RemoveInstances(p, zone, g, &compute.InstanceGroupsRemoveInstancesRequest{Instances: refs}).RequestId(rid).Context(ctx).Do()
	})
	if err != nil {
		return d.C.Classify(err)
	}
	return d.C.await(ctx, verb+" "+in.Name+" in the instance group of "+j.ID, func() (bool, error) {
		done, failed, err := d.C.pollCompute(s)(ctx, op)
		if err == nil {
			err = failed
		}
		return done, d.C.Classify(err)
	})
}

// rollSurge is the update policy's maxSurge: a regional group surges by at least one
// instance per zone (Compute Engine refuses less for a regional group), and takes none away
// before its replacement runs (maxUnavailable 0).
const rollSurge = 3

// rollMIG advances an asg pool's roll: the group is given the new template as its version
// with a proactive update policy, and then Google replaces the instances; the roll waits
// until the group reports its version target reached and itself stable (and, behind the load
// balancer, every instance healthy).
func (d VMPoolDriver) rollMIG(ctx context.Context, s *compute.Service, j *job.Job, c vmpool.Config, tmpl string, lb bool) (vmpool.RollStatus, error) {
	p, region, mname := d.C.ProjectID, d.C.Region, name(j, roleMIG)
	st := vmpool.RollStatus{}
	mig, err := s.RegionInstanceGroupManagers.Get(p, region, mname).Context(ctx).Do()
	if notFound(err) {
		return st, fault.UserAction(errors.New("the pool has no managed instance group"), "NoASG",
			"The pool's managed instance group is gone; recreate the pool.", "")
	}
	if err != nil {
		return st, d.C.Classify(err)
	}
	st.Total = int(mig.TargetSize)
	if !migOn(mig, tmpl) {
		patch := &compute.InstanceGroupManager{InstanceTemplate: tmpl, Fingerprint: mig.Fingerprint,
			Versions: []*compute.InstanceGroupManagerVersion{{Name: lastSegment(tmpl), InstanceTemplate: tmpl}},
			UpdatePolicy: &compute.InstanceGroupManagerUpdatePolicy{Type: "PROACTIVE", MinimalAction: "REPLACE",
				MaxSurge: &compute.FixedOrPercent{Fixed: rollSurge}, MaxUnavailable: &compute.FixedOrPercent{Fixed: 0, ForceSendFields: []string{"Fixed"}}}}
		// The key names the group's state (its fingerprint) as well as the template: a
		// later roll back to a template the group had is a request of its own.
		_, err := sendOnce(ctx, j, "roll "+mname+" to "+lastSegment(tmpl)+" from "+mig.Fingerprint, func(ctx context.Context, rid string) (*compute.Operation, error) {
			return s.RegionInstanceGroupManagers.Patch(p, region, mname, patch).RequestId(rid).Context(ctx).Do()
		})
		if err != nil {
			return st, d.C.Classify(err)
		}
		st.Waiting = "gave the managed instance group the new template"
		return st, nil
	}
	list, err := s.RegionInstanceGroupManagers.ListManagedInstances(p, region, mname).Context(ctx).Do()
	if err != nil {
		return st, d.C.Classify(err)
	}
	for _, mi := range list.ManagedInstances {
		if mi.Version != nil && selfLink(mi.Version.InstanceTemplate) == tmpl && mi.InstanceStatus == "RUNNING" {
			st.Replaced++
		}
	}
	st.Replaced = min(st.Replaced, st.Total)
	if mig.Status == nil || mig.Status.VersionTarget == nil || !mig.Status.VersionTarget.IsReached || !mig.Status.IsStable {
		st.Waiting = "the managed instance group is replacing its instances"
		return st, nil
	}
	if lb {
		health, err := d.groupHealth(ctx, s, j, d.poolGroup(j, c))
		if err != nil {
			return st, err
		}
		for in, h := range health {
			if h != "HEALTHY" {
				st.Waiting = "waiting for " + lastSegment(in) + " to be healthy in the backend service"
				return st, nil
			}
		}
	}
	st.Replaced, st.Done = st.Total, true
	return st, nil
}

// templateOf is the name of the template an instance was made from: Compute Engine notes
// it in the instance's instance-template metadata (projects/<number>/global/instanceTemplates/<name>).
// "" for an instance made otherwise.
func templateOf(in *compute.Instance) string {
	if in.Metadata == nil {
		return ""
	}
	for _, it := range in.Metadata.Items {
		if it.Key == "instance-template" && it.Value != nil {
			return lastSegment(*it.Value)
		}
	}
	return ""
}

// migOn reports whether the group makes its instances from tmpl, as its only version.
func migOn(mig *compute.InstanceGroupManager, tmpl string) bool {
	if len(mig.Versions) > 0 {
		return len(mig.Versions) == 1 && selfLink(mig.Versions[0].InstanceTemplate) == tmpl
	}
	return selfLink(mig.InstanceTemplate) == tmpl
}

var _ vmpool.HealthChecker = VMPoolDriver{}

// SetHealthCheck implements vmpool.HealthChecker: the pool's health check gets the config's
// request path (healthChecks.patch), once it differs; the request names the change and the
// path it replaces, so a call after a crash sends nothing twice.
// HealthCheckFields: the path only. The check's port is the pool's serving port too (the
// backend service's named port and the firewall rule), set when the pool is made.
func (d VMPoolDriver) HealthCheckFields() []string { return []string{"healthCheckPath"} }

func (d VMPoolDriver) SetHealthCheck(ctx context.Context, j *job.Job, c vmpool.Config) error {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return err
	}
	p, hc := d.C.ProjectID, name(j, roleHealth)
	cur, err := s.HealthChecks.Get(p, hc).Context(ctx).Do()
	if err != nil {
		return d.C.Classify(err)
	}
	if cur.HttpHealthCheck != nil && cur.HttpHealthCheck.RequestPath == c.HealthCheckPath {
		return nil
	}
	port := int64(c.HealthCheckPort)
	from := ""
	if cur.HttpHealthCheck != nil {
		port, from = cur.HttpHealthCheck.Port, cur.HttpHealthCheck.RequestPath
	}
	op, err := sendOnce(ctx, j, "health check path "+c.HealthCheckPath+" from "+from, func(ctx context.Context, rid string) (*compute.Operation, error) {
		return s.HealthChecks.Patch(p, hc, &compute.HealthCheck{Type: "HTTP",
			HttpHealthCheck: &compute.HTTPHealthCheck{Port: port, RequestPath: c.HealthCheckPath}}).RequestId(rid).Context(ctx).Do()
	})
	if err != nil {
		return d.C.Classify(err)
	}
	return d.C.await(ctx, "the health check of "+j.ID, func() (bool, error) {
		done, failed, err := d.C.pollCompute(s)(ctx, op)
		if err == nil {
			err = failed
		}
		return done, d.C.Classify(err)
	})
}
