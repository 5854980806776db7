package gcpfake

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

func init() { registrations = append(registrations, registerComputeVMs) }

// GuestAttributeBootstrap is the guest attribute (namespace/key) a Groundwork VM's cloud-init
// writes once its bootstrap is done.
const GuestAttributeBootstrap = "groundwork/bootstrap"

// What the fake does not do: boot. An instance goes RUNNING when its insert is done; when its
// metadata enables guest attributes and its user data writes GuestAttributeBootstrap, the fake
// plays that write on the instance's first getGuestAttributes after it runs, as a VM whose
// cloud-init succeeded would have made it. Set NoBoot to play a VM whose cloud-init never
// finishes. Each instance keeps a boot log as its console (serial port 1) output, which ends
// with cloud-init's final stage running, and with it finished once the bootstrap is played;
// SetSerialPortOutput replaces it.

// registerComputeVMs serves what a VM pool is made of: instance templates, instances and
// their guest attributes, regional managed instance groups and autoscalers, unmanaged
// instance groups, and the global external Application Load Balancer's parts (health checks,
// backend services, URL maps, SSL certificates, target proxies, global forwarding rules).
func registerComputeVMs(c *Cloud) {
	c.RegisterCompute(InstanceTemplates)
	c.RegisterCompute(Instances)
	c.RegisterCompute(InstanceGroupManagers)
	c.RegisterCompute(Autoscalers)
	c.RegisterCompute(InstanceGroups)
	c.RegisterCompute(HealthChecks)
	c.RegisterCompute(BackendServices)
	c.RegisterCompute(URLMaps)
	c.RegisterCompute(SSLCertificates)
	c.RegisterCompute(TargetHTTPProxies)
	c.RegisterCompute(TargetHTTPSProxies)
	c.RegisterCompute(GlobalForwardingRules)

	c.Handle(HostCompute, "GET "+ComputePath("zones")+"instances/{name}/getGuestAttributes", func(w http.ResponseWriter, r *http.Request) {
		inst, ok := c.ComputeGet(w, r, Instances)
		if !ok {
			return
		}
		attrs := c.guestAttributes(inst)
		q := r.URL.Query().Get("queryPath")
		var items []map[string]any
		for k, v := range attrs {
			ns, key, _ := strings.Cut(k, "/")
			if q == "" || strings.HasPrefix(k, strings.TrimSuffix(q, "/")) {
				items = append(items, map[string]any{"namespace": ns, "key": key, "value": v})
			}
		}
		if len(items) == 0 {
			WriteError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("The resource 'guest attributes %s' was not found", q), "notFound")
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "compute#guestAttributes", "queryPath": q,
			"queryValue": map[string]any{"items": items}})
	})
	// instances.getSerialPortOutput: port 1 is the console, the others are silent; start is a
	// byte offset into what the port wrote, a negative one counts back from its end.
	c.Handle(HostCompute, "GET "+ComputePath("zones")+"instances/{name}/serialPort", func(w http.ResponseWriter, r *http.Request) {
		inst, ok := c.ComputeGet(w, r, Instances)
		if !ok {
			return
		}
		port, start := int64(1), int64(0)
		if v := r.URL.Query().Get("port"); v != "" {
			if _, err := fmt.Sscan(v, &port); err != nil || port < 1 || port > 4 {
				WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value for field 'port': '"+v+"'. Must be between 1 and 4.", "invalid")
				return
			}
		}
		if v := r.URL.Query().Get("start"); v != "" {
			if _, err := fmt.Sscan(v, &start); err != nil {
				WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value for field 'start': '"+v+"'.", "invalid")
				return
			}
		}
		out := ""
		if port == 1 {
			out = c.serialPortOutput(inst)
		}
		total := int64(len(out))
		if start < 0 {
			start = max(total+start, 0)
		}
		start = min(start, total)
		WriteJSON(w, http.StatusOK, map[string]any{"kind": "compute#serialPortOutput", "contents": out[start:],
			"start": fmt.Sprint(start), "next": fmt.Sprint(total), "selfLink": SelfLinkBase + inst.Name + "/serialPort"})
	})
	c.Handle(HostCompute, "POST "+ComputePath("regions")+"instanceGroupManagers/{name}/listManagedInstances", func(w http.ResponseWriter, r *http.Request) {
		mig, ok := c.ComputeGet(w, r, InstanceGroupManagers)
		if !ok {
			return
		}
		var out []map[string]any
		for _, inst := range c.migInstances(mig) {
			out = append(out, map[string]any{"instance": SelfLinkBase + inst.Name, "instanceStatus": inst.Body["status"],
				"currentAction": "NONE", "name": inst.Body["name"], "version": map[string]any{"instanceTemplate": inst.Body["sourceInstanceTemplate"]}})
		}
		WriteJSON(w, http.StatusOK, map[string]any{"managedInstances": out})
	})
	c.Handle(HostCompute, "POST "+ComputePath("regions")+"instanceGroupManagers/{name}/resize", func(w http.ResponseWriter, r *http.Request) {
		if c.replayed(w, r) {
			return
		}
		mig, ok := c.ComputeGet(w, r, InstanceGroupManagers)
		if !ok {
			return
		}
		var size int
		if _, err := fmt.Sscan(r.URL.Query().Get("size"), &size); err != nil || size < 0 {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid value for field 'size'.", "invalid")
			return
		}
		c.StartComputeOp(w, r, c.computeParent(r, "regions"), "compute.regionInstanceGroupManagers.resize", mig.Name, func() (any, *Status) {
			m, ok := c.resources[HostCompute+" "+mig.Name]
			if !ok {
				return nil, &Status{Code: 5, Message: "gone", Reason: "RESOURCE_NOT_FOUND"}
			}
			m.Body["targetSize"] = size
			m.Body["fingerprint"] = fmt.Sprintf("fp%d", c.next())
			c.reconcileMIG(m)
			return nil, nil
		})
	})
	// An autoscaler's patch names it in the query (PATCH .../autoscalers?autoscaler=NAME).
	c.Handle(HostCompute, "PATCH "+ComputePath("regions")+"autoscalers", func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue("name", r.URL.Query().Get("autoscaler"))
		c.computePatch(w, r, Autoscalers)
	})
	c.Handle(HostCompute, "POST "+ComputePath("global")+"backendServices/{name}/getHealth", c.backendHealth)
	c.Handle(HostCompute, "POST "+ComputePath("zones")+"instanceGroups/{name}/addInstances", func(w http.ResponseWriter, r *http.Request) {
		c.groupMembers(w, r, true)
	})
	c.Handle(HostCompute, "POST "+ComputePath("zones")+"instanceGroups/{name}/removeInstances", func(w http.ResponseWriter, r *http.Request) {
		c.groupMembers(w, r, false)
	})
}

// NoBoot makes the named instance (its full name or its short one) never finish its
// bootstrap: no guest attribute appears.
func (c *Cloud) NoBoot(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noBoot == nil {
		c.noBoot = map[string]bool{}
	}
	c.noBoot[instance] = true
}

// SetSerialPortOutput makes contents what the named instance (its full name or its short
// one, made yet or not) has written to its console, in place of the boot log the fake keeps.
func (c *Cloud) SetSerialPortOutput(instance, contents string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.serial == nil {
		c.serial = map[string]string{}
	}
	c.serial[instance] = contents
}

// serialPortOutput is what an instance wrote to its console: what a test set, or the boot
// log kept in its body.
func (c *Cloud) serialPortOutput(inst Resource) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, _ := inst.Body["name"].(string)
	for _, k := range []string{inst.Name, name} {
		if out, ok := c.serial[k]; ok {
			return out
		}
	}
	if stored, ok := c.resources[HostCompute+" "+inst.Name]; ok {
		out, _ := stored.Body["x-serialPort"].(string)
		return out
	}
	return ""
}

// bootLog is the console output of an instance that has booted as far as running its
// cloud-init's final stage (the user data's commands); the lock is held.
func bootLog(self *Resource) string {
	name, _ := self.Body["name"].(string)
	ip := ""
	if nics, _ := self.Body["networkInterfaces"].([]any); len(nics) > 0 {
		if m, ok := nics[0].(map[string]any); ok {
			ip = fmt.Sprint(m["networkIP"])
		}
	}
	return strings.Join([]string{
		"SeaBIOS (version 1.8.2-google)",
		"Booting from Hard Disk 0...",
		"[    0.000000] Linux version 6.1.0-28-cloud-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)",
		"[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-cloud-amd64 root=PARTUUID=3c1b5c3e-01 ro console=ttyS0,115200 earlyprintk=ttyS0,115200 consoleblank=0",
		"[    0.812345] Run /sbin/init as init process",
		"[    1.402311] systemd[1]: Hostname set to <" + name + ">.",
		"[    2.118020] google_guest_agent[412]: GCE Agent Started (version 20241115.00)",
		"[    3.044102] cloud-init[488]: Cloud-init v. 22.4.2 running 'init' at Mon, 01 Dec 2026 12:00:03 +0000. Up 3.01 seconds.",
		"[    3.051190] cloud-init[488]: ci-info: | ens4 | True | " + ip + " | 255.255.255.255 | global |",
		"[    5.630877] cloud-init[590]: Cloud-init v. 22.4.2 running 'modules:config' at Mon, 01 Dec 2026 12:00:05 +0000. Up 5.60 seconds.",
		"[    6.902231] cloud-init[655]: Cloud-init v. 22.4.2 running 'modules:final' at Mon, 01 Dec 2026 12:00:06 +0000. Up 6.88 seconds.",
		"",
	}, "\n")
}

// guestAttributes are an instance's guest attributes, the bootstrap's played when due.
func (c *Cloud) guestAttributes(inst Resource) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	stored, ok := c.resources[HostCompute+" "+inst.Name]
	if !ok {
		return nil
	}
	attrs, _ := stored.Body["x-guestAttributes"].(map[string]any)
	if attrs == nil {
		attrs = map[string]any{}
	}
	name, _ := stored.Body["name"].(string)
	if stored.Body["status"] == "RUNNING" && !c.noBoot[inst.Name] && !c.noBoot[name] && writesBootstrap(stored.Body) {
		if _, done := attrs[GuestAttributeBootstrap]; !done {
			log, _ := stored.Body["x-serialPort"].(string)
			stored.Body["x-serialPort"] = log + "[   41.220871] cloud-init[655]: Cloud-init v. 22.4.2 finished at Mon, 01 Dec 2026 12:00:41 +0000. Datasource DataSourceGCELocal.  Up 41.20 seconds\n"
		}
		attrs[GuestAttributeBootstrap] = "ready"
		stored.Body["x-guestAttributes"] = attrs
	}
	out := map[string]string{}
	for k, v := range attrs {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// writesBootstrap reports whether an instance's metadata enables guest attributes and its
// user data writes the bootstrap attribute.
func writesBootstrap(body map[string]any) bool {
	md, _ := body["metadata"].(map[string]any)
	items, _ := md["items"].([]any)
	enabled, writes := false, false
	for _, it := range items {
		m, _ := it.(map[string]any)
		switch m["key"] {
		case "enable-guest-attributes":
			enabled = strings.EqualFold(fmt.Sprint(m["value"]), "true")
		case "user-data":
			writes = strings.Contains(fmt.Sprint(m["value"]), "guest-attributes/"+GuestAttributeBootstrap)
		}
	}
	return enabled && writes
}

// InstanceTemplates are global instance templates; a template an instance group manager
// uses is not deleted.
var InstanceTemplates = ComputeCollection{Scope: "global", Name: "instanceTemplates", Kind: "compute#instanceTemplate",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		props, _ := in["properties"].(map[string]any)
		if props == nil || props["machineType"] == nil || props["machineType"] == "" {
			return 400, "required", "Required field 'resource.properties.machineType' not specified"
		}
		if !knownMachineType(fmt.Sprint(props["machineType"])) {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.properties.machineType': '%s'. Machine type with name '%s' does not exist.", props["machineType"], props["machineType"])
		}
		return checkInterfaces(c, props)
	},
	InUse: func(c *Cloud, self Resource) string {
		return c.referrer(self, "instanceTemplate")
	},
}

// Instances are zonal VMs, made from a template (sourceInstanceTemplate) or a body of their
// own; PROVISIONING until the insert is done, then RUNNING with a private IP.
var Instances = ComputeCollection{Scope: "zones", Name: "instances", Kind: "compute#instance",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		if in["machineType"] == nil && in["sourceInstanceTemplate"] == nil {
			return 400, "required", "Required field 'resource.machineType' not specified"
		}
		return 0, "", ""
	},
	Done: func(c *Cloud, self *Resource) { c.bootInstance(self) },
	InUse: func(c *Cloud, self Resource) string {
		for _, r := range c.Resources() {
			if r.Kind == "compute#instanceGroup" && containsString(r.Body["x-instances"], SelfLinkBase+self.Name) {
				return SelfLinkBase + r.Name
			}
		}
		return ""
	},
}

// bootInstance fills a created instance from its template and starts it; the lock is held.
func (c *Cloud) bootInstance(self *Resource) {
	if src, _ := self.Body["sourceInstanceTemplate"].(string); src != "" {
		if t, ok := c.resources[HostCompute+" "+strings.TrimPrefix(src, SelfLinkBase)]; ok {
			props, _ := t.Body["properties"].(map[string]any)
			for k, v := range props {
				if _, set := self.Body[k]; !set {
					self.Body[k] = v
				}
			}
		}
		// Compute Engine notes the template an instance was made from in its metadata
		// (instance-template), on a copy of the template's metadata.
		md, _ := self.Body["metadata"].(map[string]any)
		items, _ := md["items"].([]any)
		items = append(append([]any(nil), items...), map[string]any{"key": "instance-template", "value": strings.TrimPrefix(src, SelfLinkBase)})
		self.Body["metadata"] = map[string]any{"kind": "compute#metadata", "items": items}
	}
	self.Body["status"] = "RUNNING"
	nics, _ := self.Body["networkInterfaces"].([]any)
	for i, n := range nics {
		if m, ok := n.(map[string]any); ok && m["networkIP"] == nil {
			m["networkIP"] = fmt.Sprintf("10.%d.%d.%d", 128+i, c.seq/250%250, 2+c.seq%250)
			c.seq++
		}
	}
	self.Body["x-serialPort"] = bootLog(self)
}

// InstanceGroupManagers are regional managed instance groups: they keep targetSize instances
// from their template, spread over the region's zones, and take them down with them.
var InstanceGroupManagers = ComputeCollection{Scope: "regions", Name: "instanceGroupManagers", Kind: "compute#instanceGroupManager",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		t, _ := in["instanceTemplate"].(string)
		if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(t, SelfLinkBase)); !ok {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.instanceTemplate': '%s'. The referenced instanceTemplate resource cannot be found.", t)
		}
		if in["baseInstanceName"] == nil {
			return 400, "required", "Required field 'resource.baseInstanceName' not specified"
		}
		return 0, "", ""
	},
	Done: func(c *Cloud, self *Resource) {
		region := self.Name[:strings.Index(self.Name, "/instanceGroupManagers/")]
		self.Body["instanceGroup"] = SelfLinkBase + region + "/instanceGroups/" + fmt.Sprint(self.Body["name"])
		self.Body["fingerprint"] = fmt.Sprintf("fp%d", c.next())
		c.reconcileMIG(self)
	},
	Read:  func(c *Cloud, self *Resource) { c.rollMIG(self) },
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "target") },
	Gone: func(c *Cloud, self Resource) {
		for k, r := range c.resources {
			if r.Kind == "compute#instance" && r.Body["x-createdBy"] == self.Name {
				delete(c.resources, k)
			}
		}
	},
}

// reconcileMIG makes a group's instances match its targetSize, new ones from its template;
// the lock is held.
func (c *Cloud) reconcileMIG(mig *Resource) {
	have := c.migMembers(mig)
	want := toInt(mig.Body["targetSize"])
	for i := len(have); i < want; i++ {
		c.migInstance(mig, i)
	}
	for i := want; i < len(have); i++ {
		delete(c.resources, HostCompute+" "+have[i].Name)
	}
	c.migStatus(mig)
}

// migMembers are a group's instances, by name; the lock is held.
func (c *Cloud) migMembers(mig *Resource) []*Resource {
	var have []*Resource
	for _, r := range c.resources {
		if r.Kind == "compute#instance" && r.Body["x-createdBy"] == mig.Name {
			have = append(have, r)
		}
	}
	sort.Slice(have, func(a, b int) bool { return have[a].Name < have[b].Name })
	return have
}

// migInstance makes one instance of the group from its template, in the i-th of the
// region's zones; the lock is held.
func (c *Cloud) migInstance(mig *Resource, i int) {
	project := strings.SplitN(mig.Name, "/", 3)[1]
	region := regionOfName(mig.Name)
	zone := region + "-" + string(rune('b'+i%3))
	n := fmt.Sprintf("%s-%04x", mig.Body["baseInstanceName"], c.next())
	full := "projects/" + project + "/zones/" + zone + "/instances/" + n
	inst := &Resource{Service: HostCompute, Kind: "compute#instance", Name: full, Body: map[string]any{
		"kind": "compute#instance", "name": n, "selfLink": SelfLinkBase + full, "zone": SelfLinkBase + "projects/" + project + "/zones/" + zone,
		"sourceInstanceTemplate": mig.Body["instanceTemplate"], "x-createdBy": mig.Name, "id": fmt.Sprint(7000000000000000000 + c.next()),
	}}
	c.bootInstance(inst)
	c.resources[HostCompute+" "+full] = inst
	c.made = append(c.made, full)
}

// rollMIG is one step of a group's proactive rolling update, taken on each read of the group
// (time passing): while instances are on another template than the group's, one instance on
// the group's template is surged above the target size, then one old instance is deleted,
// so the group never runs fewer than its target size. status.versionTarget.isReached is set
// once every instance is on the template, status.isStable once the group is also at its
// size. An OPPORTUNISTIC group leaves its instances as they are. The lock is held.
func (c *Cloud) rollMIG(mig *Resource) {
	policy, _ := mig.Body["updatePolicy"].(map[string]any)
	if policy["type"] != "OPPORTUNISTIC" {
		have := c.migMembers(mig)
		var olds []*Resource
		for _, in := range have {
			if !sameTemplate(in.Body["sourceInstanceTemplate"], mig.Body["instanceTemplate"]) {
				olds = append(olds, in)
			}
		}
		switch want := toInt(mig.Body["targetSize"]); {
		case len(olds) == 0:
		case len(have) <= want:
			c.migInstance(mig, len(have))
		default:
			delete(c.resources, HostCompute+" "+olds[0].Name)
		}
	}
	c.migStatus(mig)
}

// migStatus sets a group's status from its instances; the lock is held.
func (c *Cloud) migStatus(mig *Resource) {
	have := c.migMembers(mig)
	reached := true
	for _, in := range have {
		reached = reached && sameTemplate(in.Body["sourceInstanceTemplate"], mig.Body["instanceTemplate"])
	}
	mig.Body["status"] = map[string]any{"isStable": reached && len(have) == toInt(mig.Body["targetSize"]),
		"versionTarget": map[string]any{"isReached": reached}}
}

func sameTemplate(a, b any) bool {
	as, _ := a.(string)
	bs, _ := b.(string)
	return strings.TrimPrefix(as, SelfLinkBase) == strings.TrimPrefix(bs, SelfLinkBase)
}

// backendHealth is backendServices.getHealth: the health of each instance of a group the
// service sends to. There is no traffic to check, so a RUNNING instance is HEALTHY and any
// other UNHEALTHY; a group the service does not send to is refused, as Google refuses it.
func (c *Cloud) backendHealth(w http.ResponseWriter, r *http.Request) {
	bs, ok := c.ComputeGet(w, r, BackendServices)
	if !ok {
		return
	}
	var in struct {
		Group string `json:"group"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	group := strings.TrimPrefix(in.Group, SelfLinkBase)
	backends, _ := bs.Body["backends"].([]any)
	found := false
	for _, b := range backends {
		m, _ := b.(map[string]any)
		found = found || sameTemplate(m["group"], group)
	}
	if !found {
		WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("Invalid value for field 'resource.group': '%s'. Instance group not found in the backend service.", in.Group), "invalid")
		return
	}
	var members []Resource
	if mig, ok := c.Lookup(HostCompute, strings.Replace(group, "/instanceGroups/", "/instanceGroupManagers/", 1)); ok && strings.Contains(group, "/regions/") {
		members = c.migInstances(mig)
	} else if g, ok := c.Lookup(HostCompute, group); ok {
		list, _ := g.Body["x-instances"].([]any)
		for _, m := range list {
			if inst, ok := c.Lookup(HostCompute, strings.TrimPrefix(fmt.Sprint(m), SelfLinkBase)); ok {
				members = append(members, inst)
			}
		}
	}
	var out []map[string]any
	for _, m := range members {
		state := "UNHEALTHY"
		if m.Body["status"] == "RUNNING" {
			state = "HEALTHY"
		}
		h := map[string]any{"instance": SelfLinkBase + m.Name, "healthState": state, "port": 80}
		if nics, _ := m.Body["networkInterfaces"].([]any); len(nics) > 0 {
			if nic, ok := nics[0].(map[string]any); ok {
				h["ipAddress"] = nic["networkIP"]
			}
		}
		out = append(out, h)
	}
	res := map[string]any{"kind": "compute#backendServiceGroupHealth"}
	if len(out) > 0 {
		res["healthStatus"] = out
	}
	WriteJSON(w, http.StatusOK, res)
}

func (c *Cloud) migInstances(mig Resource) []Resource {
	var out []Resource
	for _, r := range c.Resources() {
		if r.Kind == "compute#instance" && r.Body["x-createdBy"] == mig.Name {
			out = append(out, r)
		}
	}
	return out
}

// Autoscalers are regional autoscalers of a managed instance group (target).
var Autoscalers = ComputeCollection{Scope: "regions", Name: "autoscalers", Kind: "compute#autoscaler",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		t, _ := in["target"].(string)
		if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(t, SelfLinkBase)); !ok {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.target': '%s'. The referenced instanceGroupManager resource cannot be found.", t)
		}
		pol, _ := in["autoscalingPolicy"].(map[string]any)
		if toInt(pol["maxNumReplicas"]) < 1 || toInt(pol["minNumReplicas"]) > toInt(pol["maxNumReplicas"]) {
			return 400, "invalid", "Invalid value for field 'resource.autoscalingPolicy': maxNumReplicas must be at least minNumReplicas and 1."
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) { self.Body["status"] = "ACTIVE" },
}

// InstanceGroups are zonal unmanaged instance groups (fixed pools behind a load balancer);
// members are added and removed with addInstances and removeInstances.
var InstanceGroups = ComputeCollection{Scope: "zones", Name: "instanceGroups", Kind: "compute#instanceGroup",
	InUse: func(c *Cloud, self Resource) string { return c.referrerInList(self, "backends", "group") },
}

func (c *Cloud) groupMembers(w http.ResponseWriter, r *http.Request, add bool) {
	if c.replayed(w, r) {
		return
	}
	g, ok := c.ComputeGet(w, r, InstanceGroups)
	if !ok {
		return
	}
	var in struct {
		Instances []struct {
			Instance string `json:"instance"`
		} `json:"instances"`
	}
	if !ReadJSON(w, r, &in) {
		return
	}
	for _, i := range in.Instances {
		if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(i.Instance, SelfLinkBase)); !ok && add {
			WriteError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("The resource '%s' was not found", i.Instance), "invalid")
			return
		}
	}
	verb := "addInstances"
	if !add {
		verb = "removeInstances"
	}
	c.StartComputeOp(w, r, c.computeParent(r, "zones"), "compute.instanceGroups."+verb, g.Name, func() (any, *Status) {
		stored, ok := c.resources[HostCompute+" "+g.Name]
		if !ok {
			return nil, &Status{Code: 5, Message: "gone", Reason: "RESOURCE_NOT_FOUND"}
		}
		members := map[string]bool{}
		list, _ := stored.Body["x-instances"].([]any)
		for _, m := range list {
			members[fmt.Sprint(m)] = true
		}
		for _, i := range in.Instances {
			members[i.Instance] = add
		}
		var out []any
		for m, in := range members {
			if in {
				out = append(out, m)
			}
		}
		stored.Body["x-instances"] = out
		stored.Body["size"] = len(out)
		return nil, nil
	})
}

// HealthChecks are global health checks.
var HealthChecks = ComputeCollection{Scope: "global", Name: "healthChecks", Kind: "compute#healthCheck",
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "healthChecks") },
}

// BackendServices are global backend services; their backends name instance groups.
var BackendServices = ComputeCollection{Scope: "global", Name: "backendServices", Kind: "compute#backendService",
	Check: func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		hcs, _ := in["healthChecks"].([]any)
		for _, h := range hcs {
			if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(fmt.Sprint(h), SelfLinkBase)); !ok {
				return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.healthChecks[0]': '%s'. The referenced healthCheck resource cannot be found.", h)
			}
		}
		return 0, "", ""
	},
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "defaultService") },
}

// URLMaps route to a default backend service.
var URLMaps = ComputeCollection{Scope: "global", Name: "urlMaps", Kind: "compute#urlMap",
	Check: refChecker("defaultService", "backendService"),
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "urlMap") },
	Done:  func(_ *Cloud, self *Resource) { self.Body["fingerprint"] = "fp1" },
}

// SSLCertificates are global SSL certificates: Google-managed (type MANAGED, domains) or
// self-managed (certificate and privateKey PEMs). A managed one is PROVISIONING until its
// domains resolve to a load balancer using it, which the fake does not check: it says ACTIVE.
var SSLCertificates = ComputeCollection{Scope: "global", Name: "sslCertificates", Kind: "compute#sslCertificate",
	Check: func(_ *Cloud, _ string, in map[string]any) (int, string, string) {
		switch in["type"] {
		case "MANAGED":
			m, _ := in["managed"].(map[string]any)
			if d, _ := m["domains"].([]any); len(d) == 0 {
				return 400, "required", "Required field 'resource.managed.domains' not specified"
			}
		default:
			cert, _ := in["certificate"].(string)
			key, _ := in["privateKey"].(string)
			if !strings.Contains(cert, "BEGIN CERTIFICATE") || !strings.Contains(key, "PRIVATE KEY") {
				return 400, "invalid", "The SSL certificate and key could not be parsed."
			}
		}
		return 0, "", ""
	},
	Done: func(_ *Cloud, self *Resource) {
		delete(self.Body, "privateKey") // never returned
		if self.Body["type"] == "MANAGED" {
			m, _ := self.Body["managed"].(map[string]any)
			m["status"] = "ACTIVE"
		}
	},
	InUse: func(c *Cloud, self Resource) string { return c.referrerInList(self, "sslCertificates", "") },
}

// TargetHTTPProxies route port 80 of a forwarding rule to a URL map.
var TargetHTTPProxies = ComputeCollection{Scope: "global", Name: "targetHttpProxies", Kind: "compute#targetHttpProxy",
	Check: refChecker("urlMap", "urlMap"),
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "target") },
}

// TargetHTTPSProxies terminate TLS with their certificates and route to a URL map.
var TargetHTTPSProxies = ComputeCollection{Scope: "global", Name: "targetHttpsProxies", Kind: "compute#targetHttpsProxy",
	Check: func(c *Cloud, scope string, in map[string]any) (int, string, string) {
		if st, r, m := refChecker("urlMap", "urlMap")(c, scope, in); st != 0 {
			return st, r, m
		}
		if certs, _ := in["sslCertificates"].([]any); len(certs) == 0 {
			return 400, "required", "Required field 'resource.sslCertificates' not specified"
		}
		return 0, "", ""
	},
	InUse: func(c *Cloud, self Resource) string { return c.referrer(self, "target") },
}

// GlobalForwardingRules send an address and port to a target proxy.
var GlobalForwardingRules = ComputeCollection{Scope: "global", Name: "forwardingRules", Kind: "compute#forwardingRule",
	Check: func(c *Cloud, scope string, in map[string]any) (int, string, string) {
		if st, r, m := refChecker("target", "target proxy")(c, scope, in); st != 0 {
			return st, r, m
		}
		if in["portRange"] == nil {
			return 400, "required", "Required field 'resource.portRange' not specified"
		}
		return 0, "", ""
	},
}

// refChecker refuses an insert whose field names a resource that does not exist.
func refChecker(field, what string) func(*Cloud, string, map[string]any) (int, string, string) {
	return func(c *Cloud, _ string, in map[string]any) (int, string, string) {
		ref, _ := in[field].(string)
		if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(ref, SelfLinkBase)); !ok {
			return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.%s': '%s'. The referenced %s resource cannot be found.", field, ref, what)
		}
		return 0, "", ""
	}
}

// referrer names a compute resource whose field refers to self (a string or a list of them).
func (c *Cloud) referrer(self Resource, field string) string {
	link := SelfLinkBase + self.Name
	for _, r := range c.Resources() {
		if r.Service == HostCompute && r.Name != self.Name && (r.Body[field] == link || containsString(r.Body[field], link)) {
			return SelfLinkBase + r.Name
		}
	}
	return ""
}

// referrerInList names a compute resource with a list field whose items (or the items'
// key, when key is not "") refer to self: a backend service's backends[].group.
func (c *Cloud) referrerInList(self Resource, field, key string) string {
	link := SelfLinkBase + self.Name
	for _, r := range c.Resources() {
		list, _ := r.Body[field].([]any)
		for _, it := range list {
			if key == "" && it == link {
				return SelfLinkBase + r.Name
			}
			if m, ok := it.(map[string]any); ok && key != "" && m[key] == link {
				return SelfLinkBase + r.Name
			}
		}
	}
	return ""
}

// checkInterfaces refuses network interfaces that name a network or subnetwork that does not
// exist, or that ask for an external address.
func checkInterfaces(c *Cloud, props map[string]any) (int, string, string) {
	nics, _ := props["networkInterfaces"].([]any)
	for _, n := range nics {
		m, _ := n.(map[string]any)
		for _, f := range []string{"network", "subnetwork"} {
			if ref, _ := m[f].(string); ref != "" {
				if _, ok := c.Lookup(HostCompute, strings.TrimPrefix(ref, SelfLinkBase)); !ok {
					return 400, "invalid", fmt.Sprintf("Invalid value for field 'resource.properties.networkInterfaces[0].%s': '%s'. The referenced %s resource cannot be found.", f, ref, f)
				}
			}
		}
	}
	return 0, "", ""
}

func knownMachineType(t string) bool {
	t = t[strings.LastIndex(t, "/")+1:]
	for _, m := range machineTypes {
		if m.name == t {
			return true
		}
	}
	return strings.HasPrefix(t, "custom-")
}

func containsString(list any, s string) bool {
	l, _ := list.([]any)
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

func toInt(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case string:
		var i int
		_, _ = fmt.Sscan(n, &i)
		return i
	}
	return 0
}

// regionOfName is the region of a regional resource name (projects/p/regions/r/...).
func regionOfName(name string) string {
	parts := strings.Split(name, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "regions" {
			return parts[i+1]
		}
	}
	return ""
}
