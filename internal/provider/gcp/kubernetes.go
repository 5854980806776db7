package gcp

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	compute "google.golang.org/api/compute/v1"
	container "google.golang.org/api/container/v1"
	"google.golang.org/api/googleapi"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline/kubernetes"
)

// Label roles (and name roles) of a cluster job's resources.
const (
	roleK8sNetwork = "kubernetes-network"
	roleK8sSubnet  = "kubernetes-subnet"
	roleK8sCluster = "kubernetes-cluster"
	roleK8sPool    = "kubernetes-pool"
)

// Address ranges of a job's own network: the nodes' subnet, and its secondary ranges that
// GKE gives pods and services (VPC-native addressing, required for private nodes).
const (
	nodesCIDR    = "10.0.0.0/20"
	podsCIDR     = "10.4.0.0/14"
	servicesCIDR = "10.8.0.0/20"
	podsRange    = "pods"
	servicesRng  = "services"
)

// ReleaseChannel is the GKE release channel clusters are enrolled in: GKE upgrades their
// control plane and (with auto-upgrade) their nodes within it.
const ReleaseChannel = "REGULAR"

// zonesPerRegion is how many zones a regional cluster's node pools span when the config
// names none: three in most regions.
const zonesPerRegion = 3

// KubernetesDriver makes a job's GKE cluster: a custom-mode VPC network with one subnet in
// the space's region (secondary ranges for pods and services, Private Google Access on), the
// nodes' service account with the narrowest roles, and a regional cluster with private
// nodes, workload identity and a release channel, one node pool per node group. The job's
// network has no Cloud NAT here: private nodes reach Google's APIs through Private Google
// Access, and their egress to the internet comes from the Cloud NAT the network family makes.
type KubernetesDriver struct{ C *Client }

var _ kubernetes.Driver = KubernetesDriver{}

// KubernetesDriver implements provider.KubernetesDrivers.
func (m *Module) KubernetesDriver(ctx context.Context, j *job.Job) (kubernetes.Driver, error) {
	c, err := m.Client(ctx, j)
	if err != nil {
		return nil, err
	}
	return KubernetesDriver{C: c}, nil
}

// ClusterToken implements provider.KubernetesDrivers: an access token of the space's cloud
// account. A GKE API server takes Google OAuth access tokens and authorizes their principal
// by its IAM roles on the project (Kubernetes Engine Admin or Developer) and the cluster's
// RBAC, so the same token serves every cluster of the project.
func (m *Module) ClusterToken(ctx context.Context, orgID, spaceID, _ string) (string, error) {
	c, err := m.ClientFor(ctx, orgID, spaceID)
	if err != nil {
		return "", err
	}
	return c.Token(ctx)
}

func (d KubernetesDriver) networkID(j *job.Job) string {
	return "projects/" + d.C.ProjectID + "/global/networks/" + name(j, "gke")
}

func (d KubernetesDriver) subnetID(j *job.Job) string {
	return "projects/" + d.C.ProjectID + "/regions/" + d.C.Region + "/subnetworks/" + name(j, "gke-nodes")
}

// EnsureNetwork implements kubernetes.Driver: the job's own network and subnet, one call at
// a time with the operation in flight recorded in Data.ops, or the adopted network vpcID
// names (never the job's to delete). Data names the subnet's secondary ranges for pods and
// services.
func (d KubernetesDriver) EnsureNetwork(ctx context.Context, j *job.Job, cfg kubernetes.Config) (kubernetes.Network, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return kubernetes.Network{}, err
	}
	if cfg.VPCID != "" {
		return d.adopt(ctx, s, cfg)
	}
	ops := opsOf(j, kubernetes.InfraNetwork)
	out := kubernetes.Network{VPCID: d.networkID(j), SubnetIDs: []string{d.subnetID(j)},
		Data: map[string]any{"ops": ops, "podsRange": podsRange, "servicesRange": servicesRng}}
	ok, err := d.C.converge(ctx, ops, "create network", d.network(s, j))
	if !ok || err != nil {
		return out, err
	}
	out.Ready, err = d.C.converge(ctx, ops, "create subnetwork", d.subnet(s, j))
	return out, err
}

func (d KubernetesDriver) network(s *compute.Service, j *job.Job) Resource {
	p, n := d.C.ProjectID, name(j, "gke")
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			got, err := s.Networks.Get(p, n).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Ours: ownsDescription(j, got.Description), Ready: true}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			return startCompute(s.Networks.Insert(p, &compute.Network{Name: n, Description: description(j, roleK8sNetwork),
				AutoCreateSubnetworks: false, ForceSendFields: []string{"AutoCreateSubnetworks"},
				RoutingConfig: &compute.NetworkRoutingConfig{RoutingMode: "REGIONAL"}}).
				RequestId(requestID(j, "create network")).Context(ctx).Do())
		},
		Delete: func(ctx context.Context) (string, error) {
			return startCompute(s.Networks.Delete(p, n).RequestId(requestID(j, "delete network")).Context(ctx).Do())
		},
		Poll: d.C.pollCompute(s),
	}
}

func (d KubernetesDriver) subnet(s *compute.Service, j *job.Job) Resource {
	p, r, n := d.C.ProjectID, d.C.Region, name(j, "gke-nodes")
	return Resource{
		Get: func(ctx context.Context) (State, error) {
			got, err := s.Subnetworks.Get(p, r, n).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			return State{Found: true, Ours: ownsDescription(j, got.Description), Ready: true}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			return startCompute(s.Subnetworks.Insert(p, r, &compute.Subnetwork{Name: n, Description: description(j, roleK8sSubnet),
				Network: selfLink(d.networkID(j)), IpCidrRange: nodesCIDR, PrivateIpGoogleAccess: true,
				SecondaryIpRanges: []*compute.SubnetworkSecondaryRange{
					{RangeName: podsRange, IpCidrRange: podsCIDR}, {RangeName: servicesRng, IpCidrRange: servicesCIDR}}}).
				RequestId(requestID(j, "create subnetwork")).Context(ctx).Do())
		},
		Delete: func(ctx context.Context) (string, error) {
			return startCompute(s.Subnetworks.Delete(p, r, n).RequestId(requestID(j, "delete subnetwork")).Context(ctx).Do())
		},
		Poll: d.C.pollCompute(s),
	}
}

// computeName splits a network or subnetwork id (a name, projects/p/... or a self link)
// into its project and name; a bare name is in the client's project.
func (c *Client) computeName(id string) (project, name string) {
	id = strings.TrimPrefix(strings.TrimPrefix(id, "https://www.googleapis.com/compute/v1/"), "https://compute.googleapis.com/compute/v1/")
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) >= 2 && parts[0] == "projects" {
		return parts[1], parts[len(parts)-1]
	}
	return c.ProjectID, parts[len(parts)-1]
}

// adopt reads the network vpcID names and the nodes' subnet: the first of subnetIDs, else
// the network's first subnet (by name) in the space's region. The pods' and services'
// ranges are the subnet's secondary ranges named for them; when it has none so named, GKE
// adds ranges to the subnet itself.
func (d KubernetesDriver) adopt(ctx context.Context, s *compute.Service, cfg kubernetes.Config) (kubernetes.Network, error) {
	np, nn := d.C.computeName(cfg.VPCID)
	nw, err := s.Networks.Get(np, nn).Context(ctx).Do()
	if notFound(err) {
		return kubernetes.Network{}, fault.UserAction(fmt.Errorf("network %s: %w", cfg.VPCID, err), "NetworkNotFound",
			"The network vpcID names is not in project "+np+"; name an existing VPC network, or leave vpcID out for the job's own.", d.C.ConsoleURL("networking/networks/list"))
	}
	if err != nil {
		return kubernetes.Network{}, d.C.Classify(err)
	}
	var sub *compute.Subnetwork
	if len(cfg.SubnetIDs) > 0 {
		sp, sn := d.C.computeName(cfg.SubnetIDs[0])
		sub, err = s.Subnetworks.Get(sp, d.C.Region, sn).Context(ctx).Do()
		if err != nil && !notFound(err) {
			return kubernetes.Network{}, d.C.Classify(err)
		}
	} else {
		list, err := s.Subnetworks.List(np, d.C.Region).Context(ctx).Do()
		if err != nil {
			return kubernetes.Network{}, d.C.Classify(err)
		}
		items := list.Items
		sort.Slice(items, func(a, b int) bool { return items[a].Name < items[b].Name })
		for _, it := range items {
			if it.Network == nw.SelfLink || strings.HasSuffix(it.Network, "/projects/"+np+"/global/networks/"+nn) {
				sub = it
				break
			}
		}
	}
	if sub == nil {
		return kubernetes.Network{}, fault.UserAction(fmt.Errorf("network %s has no subnet in %s", cfg.VPCID, d.C.Region), "NoSubnet",
			"The adopted network needs a subnet in "+d.C.Region+" for the nodes; add one or name it in subnetIDs.", d.C.ConsoleURL("networking/networks/list"))
	}
	data := map[string]any{"adopted": true}
	for _, r := range sub.SecondaryIpRanges {
		n := strings.ToLower(r.RangeName)
		switch {
		case strings.Contains(n, "pod") && data["podsRange"] == nil:
			data["podsRange"] = r.RangeName
		case (strings.Contains(n, "service") || strings.Contains(n, "svc")) && data["servicesRange"] == nil:
			data["servicesRange"] = r.RangeName
		}
	}
	sp, sn := d.C.computeName(sub.SelfLink)
	return kubernetes.Network{VPCID: "projects/" + np + "/global/networks/" + nn,
		SubnetIDs: []string{"projects/" + sp + "/regions/" + d.C.Region + "/subnetworks/" + sn}, Ready: true, Data: data}, nil
}

// DeleteNetwork implements kubernetes.Driver: the job's subnet, then its network (Google
// refuses to delete a network with a subnet). An adopted network is never under the job's
// names, so nothing of it is deleted.
func (d KubernetesDriver) DeleteNetwork(ctx context.Context, j *job.Job) (bool, error) {
	s, err := d.C.computeService(ctx)
	if err != nil {
		return false, err
	}
	ops := Ops{}
	if gone, err := d.C.remove(ctx, ops, "delete subnetwork", d.subnet(s, j)); !gone || err != nil {
		return false, err
	}
	return d.C.remove(ctx, ops, "delete network", d.network(s, j))
}

func (d KubernetesDriver) service(ctx context.Context) (*container.Service, error) {
	s, err := container.NewService(ctx, d.C.Options(ServiceContainer)...)
	if err != nil {
		return nil, fault.System(err)
	}
	return s, nil
}

func (d KubernetesDriver) parent() string {
	return "projects/" + d.C.ProjectID + "/locations/" + d.C.Region
}

// clusterID is the job's cluster's resource name.
func (d KubernetesDriver) clusterID(j *job.Job) string {
	return d.parent() + "/clusters/" + name(j, "gke")
}

// poolNames are the node groups' node pool names: GKE's rule (a lower-case letter, then
// lower-case letters, digits and '-', at most 40) applied to each group's name; names that
// clash once cleaned get their index.
func poolNames(groups []kubernetes.NodeGroup) []string {
	out := make([]string, len(groups))
	seen := map[string]bool{}
	for i, ng := range groups {
		n := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(ng.Name), "-"), "-_")
		n = strings.ReplaceAll(n, "_", "-")
		if n == "" || n[0] < 'a' || n[0] > 'z' {
			n = "np-" + n
		}
		if len(n) > 36 {
			n = n[:36]
		}
		n = strings.TrimRight(n, "-")
		if seen[n] {
			n = fmt.Sprintf("%s-%d", n, i)
		}
		seen[n] = true
		out[i] = n
	}
	return out
}

// nodePools are the node groups as GKE node pools: the group's machine type, autoscaled
// between its min and max nodes in total across the region's zones, running as the nodes'
// service account, auto-upgraded and auto-repaired. A regional pool starts with its initial
// count in each of its zones, so that is the min spread over them, and at least one.
func nodePools(j *job.Job, groups []kubernetes.NodeGroup, nodeSA string) ([]*container.NodePool, error) {
	names := poolNames(groups)
	out := make([]*container.NodePool, 0, len(groups))
	for i, ng := range groups {
		if ng.InstanceType == "" || ng.Min < 0 || ng.Max < 1 || ng.Min > ng.Max {
			return nil, fault.UserAction(fmt.Errorf("node group %q: machine type %q, min %d, max %d", ng.Name, ng.InstanceType, ng.Min, ng.Max), "NodeGroupInvalid",
				fmt.Sprintf("nodeGroups[%d]: GKE needs a machine type and 0 <= min <= max with max >= 1; correct the node group, then retry.", i), "")
		}
		initial := max(1, (int64(ng.Min)+zonesPerRegion-1)/zonesPerRegion)
		out = append(out, &container.NodePool{
			Name:             names[i],
			InitialNodeCount: initial,
			Autoscaling: &container.NodePoolAutoscaling{Enabled: true, LocationPolicy: "BALANCED",
				TotalMinNodeCount: int64(ng.Min), TotalMaxNodeCount: int64(ng.Max), ForceSendFields: []string{"TotalMinNodeCount"}},
			Config: &container.NodeConfig{MachineType: ng.InstanceType, ServiceAccount: nodeSA,
				OauthScopes:            []string{Scope},
				ResourceLabels:         labels(j, roleK8sPool),
				WorkloadMetadataConfig: &container.WorkloadMetadataConfig{Mode: "GKE_METADATA"}},
			Management: &container.NodeManagement{AutoUpgrade: true, AutoRepair: true},
		})
	}
	return out, nil
}

// clusterSpec is the job's cluster as GKE's create takes it.
func (d KubernetesDriver) clusterSpec(j *job.Job, cfg kubernetes.Config, n kubernetes.Network, pools []*container.NodePool) *container.Cluster {
	pods, _ := n.Data["podsRange"].(string)
	services, _ := n.Data["servicesRange"].(string)
	return &container.Cluster{
		Name: name(j, "gke"), Description: description(j, roleK8sCluster), ResourceLabels: labels(j, roleK8sCluster),
		Network: n.VPCID, Subnetwork: n.SubnetIDs[0],
		InitialClusterVersion: cfg.Version,
		ReleaseChannel:        &container.ReleaseChannel{Channel: ReleaseChannel},
		// Pods get their own Google identity through the project's workload pool, not the
		// nodes' service account.
		WorkloadIdentityConfig: &container.WorkloadIdentityConfig{WorkloadPool: d.C.ProjectID + ".svc.id.goog"},
		// Nodes have no external addresses. With no master CIDR given, GKE reaches them
		// from the control plane through Private Service Connect. A private cluster's API
		// server has only its address in the network.
		PrivateClusterConfig: &container.PrivateClusterConfig{EnablePrivateNodes: true, EnablePrivateEndpoint: cfg.PrivateCluster},
		IpAllocationPolicy: &container.IPAllocationPolicy{UseIpAliases: true,
			ClusterSecondaryRangeName: pods, ServicesSecondaryRangeName: services},
		NodePools: pools,
	}
}

// EnsureCluster implements kubernetes.Driver, one call at a time: the cluster with its node
// pools (one create, its operation recorded in Data.ops), then the control plane upgraded
// when the config names a newer minor version, any node group added since as a node pool of
// its own, any pool whose bounds changed resized, and the job's pools the config no longer
// names deleted, then the endpoint and CA. Ready once the cluster serves (RUNNING,
// RECONCILING or DEGRADED), every pool is RUNNING at its node group's bounds and the removed
// ones are gone.
func (d KubernetesDriver) EnsureCluster(ctx context.Context, j *job.Job, cfg kubernetes.Config, n kubernetes.Network, r kubernetes.Roles) (kubernetes.Cluster, error) {
	ops := opsOf(j, kubernetes.InfraCluster)
	out := kubernetes.Cluster{Name: cfg.Name, ID: d.clusterID(j), Data: map[string]any{"ops": ops}}
	if len(n.SubnetIDs) == 0 || n.VPCID == "" || r.NodeRole == "" {
		return out, fault.System(errors.New("the cluster step has no network or no node service account on record"))
	}
	if len(cfg.NodeGroups) == 0 {
		return out, fault.UserAction(errors.New("no node groups"), "InvalidConfig", "nodeGroups: at least one", "")
	}
	pools, err := nodePools(j, cfg.NodeGroups, r.NodeRole)
	if err != nil {
		return out, err
	}
	s, err := d.service(ctx)
	if err != nil {
		return out, err
	}
	full := d.clusterID(j)
	var got *container.Cluster
	ok, err := d.C.converge(ctx, ops, "create cluster", Resource{
		Get: func(ctx context.Context) (State, error) {
			cl, err := s.Projects.Locations.Clusters.Get(full).Context(ctx).Do()
			if notFound(err) {
				return State{}, nil
			}
			if err != nil {
				return State{}, err
			}
			got = cl
			if cl.Status == "ERROR" {
				return State{}, d.failed("cluster "+cl.Name, cl.StatusMessage, cl.Conditions)
			}
			return State{Found: true, Ours: owns(j, cl.ResourceLabels), Ready: usable(cl.Status)}, nil
		},
		Create: func(ctx context.Context) (string, error) {
			op, err := s.Projects.Locations.Clusters.Create(d.parent(), &container.CreateClusterRequest{
				Cluster: d.clusterSpec(j, cfg, n, pools)}).Context(ctx).Do()
			return d.started(op, err)
		},
		Poll: d.poll(s),
	})
	if !ok || err != nil {
		return out, err
	}
	// A newer version goes first (GKE upgrades the control plane in place), then the pools.
	if got != nil {
		if ok, err := d.upgradeMaster(ctx, s, ops, full, got, cfg.Version); !ok || err != nil {
			return out, err
		}
	}
	for _, p := range pools {
		// A resize in flight is waited on before the pool is read and compared again.
		if done, err := d.C.pollRecorded(ctx, ops, "resize pool "+p.Name, Resource{Poll: d.poll(s)}); err != nil || !done {
			return out, err
		}
		var have *container.NodePool
		ready, err := d.C.converge(ctx, ops, "create pool "+p.Name, Resource{
			Get: func(ctx context.Context) (State, error) {
				np, err := s.Projects.Locations.Clusters.NodePools.Get(full + "/nodePools/" + p.Name).Context(ctx).Do()
				if notFound(err) {
					return State{}, nil
				}
				if err != nil {
					return State{}, err
				}
				if np.Status == "ERROR" {
					return State{}, d.failed("node pool "+np.Name, np.StatusMessage, np.Conditions)
				}
				have = np
				// A pool is the cluster's: it carries no labels of its own to tell.
				return State{Found: true, Ours: true, Ready: np.Status == "RUNNING" || np.Status == "RUNNING_WITH_ERROR"}, nil
			},
			Create: func(ctx context.Context) (string, error) {
				op, err := s.Projects.Locations.Clusters.NodePools.Create(full, &container.CreateNodePoolRequest{NodePool: p}).Context(ctx).Do()
				if busy(err) {
					// Another operation works on the cluster; GKE takes one at a time.
					return "", fault.Transientf("cluster %s is busy with another operation", full)
				}
				return d.started(op, err)
			},
			Poll: d.poll(s),
		})
		if !ready || err != nil {
			return out, err
		}
		if have != nil && !sameScaling(have.Autoscaling, p.Autoscaling) {
			// The node group's bounds changed: the pool's autoscaler takes the new ones in
			// place. (A machine type cannot change in place on GKE, so it is not compared.)
			// While GKE changes the cluster (this resize, sent by a call whose result was
			// lost, or an upgrade) it refuses another change: wait for it.
			if got != nil && got.Status == "RECONCILING" {
				return out, nil
			}
			op, err := s.Projects.Locations.Clusters.NodePools.SetAutoscaling(full+"/nodePools/"+p.Name,
				&container.SetNodePoolAutoscalingRequest{Autoscaling: p.Autoscaling}).Context(ctx).Do()
			if busy(err) {
				return out, nil
			}
			name, err := d.started(op, err)
			if err != nil {
				return out, d.C.Classify(err)
			}
			if name != "" {
				ops["resize pool "+p.Name] = name
			}
			return out, nil
		}
	}
	// The job's pools the config no longer names go last, once the others are up to take
	// their pods.
	if gone, err := d.removePools(ctx, s, j, ops, full, poolNames(cfg.NodeGroups)); !gone || err != nil {
		return out, err
	}
	if got == nil || !usable(got.Status) {
		if got, err = s.Projects.Locations.Clusters.Get(full).Context(ctx).Do(); err != nil {
			return out, d.C.Classify(err)
		}
	}
	if got.Endpoint == "" {
		return out, fault.Transientf("cluster %s has no API server address yet", full)
	}
	var ca string
	if got.MasterAuth != nil {
		ca = got.MasterAuth.ClusterCaCertificate
	}
	if err := checkCA(ca); err != nil {
		return out, err
	}
	out.Endpoint, out.CAData, out.Ready = "https://"+got.Endpoint, ca, true
	return out, nil
}

// usable reports a cluster status in which its API server serves: RUNNING, RECONCILING
// (GKE is changing it, an upgrade or a pool's resize) or DEGRADED.
func usable(status string) bool {
	return status == "RUNNING" || status == "RECONCILING" || status == "DEGRADED"
}

// sameScaling reports whether a pool's autoscaling has the bounds want asks for.
func sameScaling(have, want *container.NodePoolAutoscaling) bool {
	return have != nil && have.Enabled == want.Enabled &&
		have.TotalMinNodeCount == want.TotalMinNodeCount && have.TotalMaxNodeCount == want.TotalMaxNodeCount
}

// checkCA holds the cluster's CA as GKE gives it (masterAuth.clusterCaCertificate) to what
// the pipeline records: base64 of a PEM certificate, as EKS and a kubeconfig carry it.
func checkCA(ca string) error {
	if ca == "" {
		return fault.Transientf("the cluster has no CA certificate yet")
	}
	raw, err := base64.StdEncoding.DecodeString(ca)
	if err != nil {
		return fault.System(fmt.Errorf("the cluster's CA is not base64: %w", err))
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return fault.System(errors.New("the cluster's CA is not a PEM certificate"))
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fault.System(fmt.Errorf("the cluster's CA: %w", err))
	}
	return nil
}

// failed is a cluster or pool GKE reports in status ERROR: GKE gave up making it, and the
// job cannot go on until the user deletes it (or the job).
func (d KubernetesDriver) failed(what, message string, conds []*container.StatusCondition) error {
	for _, c := range conds {
		if c != nil && c.Message != "" {
			message = strings.TrimSpace(message + " " + c.Message)
		}
	}
	return fault.UserAction(fmt.Errorf("%s is in status ERROR: %s", what, message), "ClusterFailed",
		"GKE could not make the "+what+" ("+message+"); delete the job to remove it, correct the config, then create the job again.",
		d.C.ConsoleURL("kubernetes/list/overview"))
}

// started is a create or delete call's answer as Resource.Create and Delete return it: the
// operation to poll, by its resource name, or none when GKE finished before answering.
func (d KubernetesDriver) started(op *container.Operation, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if op.Status == "DONE" {
		if op.Error != nil {
			return "", statusError(op.Error.Code, op.Error.Message, op.Error.Details)
		}
		return "", nil
	}
	return d.parent() + "/operations/" + op.Name, nil
}

// poll reads a GKE operation (projects.locations.operations.get) once.
func (d KubernetesDriver) poll(s *container.Service) func(ctx context.Context, name string) (bool, error, error) {
	return func(ctx context.Context, name string) (bool, error, error) {
		op, err := s.Projects.Locations.Operations.Get(name).Context(ctx).Do()
		if err != nil {
			return false, nil, err
		}
		if op.Status != "DONE" {
			return false, nil, nil
		}
		if op.Error != nil {
			return true, statusError(op.Error.Code, op.Error.Message, op.Error.Details), nil
		}
		return true, nil, nil
	}
}

// busy reports GKE's refusal of a change while another operation works on the cluster
// (400 FAILED_PRECONDITION, "Cluster is running incompatible operation ...").
func busy(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusBadRequest &&
		(strings.Contains(ge.Body, "FAILED_PRECONDITION") || strings.Contains(ge.Message, "incompatible operation"))
}

// DeleteCluster implements kubernetes.Driver: the cluster, whose node pools GKE deletes with
// it; done once a read answers 404. A cluster GKE is still making, or already deleting, is
// waited on: GKE refuses a delete while another operation works on it. A cluster of the
// job's name without the job's labels is not the job's to delete.
func (d KubernetesDriver) DeleteCluster(ctx context.Context, j *job.Job, _ string) (bool, error) {
	s, err := d.service(ctx)
	if err != nil {
		return false, err
	}
	full := d.clusterID(j)
	cl, err := s.Projects.Locations.Clusters.Get(full).Context(ctx).Do()
	switch {
	case notFound(err):
		return true, nil
	case err != nil:
		return false, d.C.Classify(err)
	case !owns(j, cl.ResourceLabels):
		return true, nil
	case cl.Status == "STOPPING" || cl.Status == "PROVISIONING" || cl.Status == "RECONCILING":
		return false, nil
	}
	_, err = s.Projects.Locations.Clusters.Delete(full).Context(ctx).Do()
	switch {
	case notFound(err):
		return true, nil
	case busy(err):
		return false, nil
	case err != nil:
		return false, d.C.Classify(err)
	}
	return false, nil
}
