package catalog

import (
	"encoding/json"
	"fmt"
)

// Built-in pairs: the ones Groundwork's own pipelines handle.
var (
	PairPostgres      = Pair{Kind: CategoryManagedResource, Type: "postgres"}
	PairMySQL         = Pair{Kind: CategoryManagedResource, Type: "mysql"}
	PairRedis         = Pair{Kind: CategoryManagedResource, Type: "redis"}
	PairKubernetes    = Pair{Kind: CategoryTarget, Type: "kubernetes"}
	PairVMPool        = Pair{Kind: CategoryTarget, Type: "vm-pool"}
	PairNetwork       = Pair{Kind: CategoryManagedResource, Type: "network"}
	PairRegistry      = Pair{Kind: CategoryManagedResource, Type: "registry"}
	PairDNSZone       = Pair{Kind: CategoryManagedResource, Type: "dns-zone"}
	PairHelmComponent = Pair{Kind: CategoryTool, Type: "helm-component"}
	// PairBucket has no built-in provisioner: examples/provisioner serves it. It is in the
	// catalog so that jobs for it are validated like any other.
	PairBucket = Pair{Kind: CategoryManagedResource, Type: "bucket"}
)

// BuiltinPairs are the pairs Groundwork's own provisioner holds from start-up.
func BuiltinPairs() []Pair {
	return []Pair{
		PairPostgres, PairMySQL, PairRedis, PairKubernetes, PairVMPool,
		PairNetwork, PairRegistry, PairDNSZone, PairHelmComponent,
	}
}

// Builtin returns a catalog holding the built-in types (and the example bucket type).
func Builtin() (*Catalog, error) { return New(BuiltinTypes()...) }

// A resource name as most clouds accept it: lower-case, digits and dashes.
const nameSchema = `{"type":"string","pattern":"^[a-z][a-z0-9-]{0,62}$","description":"lower-case letters, digits and dashes; starts with a letter"}`

// datastoreSchema fills in the engine, which the pair decides (a provisioner-protocol call names
// the pair, not the engine); the jobs API reads it to choose the pair, and requires it there.
// It leaves version without a default: the right one depends on the provider (the
// local provider can only run the server that is installed), so the provider picks it.
func datastoreSchema(engine, exampleVersion string, withStorage bool) json.RawMessage {
	storage := ""
	if withStorage {
		storage = `"allocatedStorageGB": {"type":"integer","minimum":5,"maximum":65536,"default":20,"description":"disk size in GiB"},`
	}
	return json.RawMessage(fmt.Sprintf(`{
	"type": "object",
	"properties": {
		"engine": {"type":"string","enum":[%[1]q],"default":%[1]q,"description":"the database engine; fixed by the type"},
		"name": %s,
		"version": {"type":"string","minLength":1,"description":"engine version; when omitted the provider picks one (local: the installed server; clouds: their current default, e.g. %s)"},
		"instanceClass": {"type":"string","minLength":1,"description":"provider machine class, e.g. db.t3.medium"},
		%s
		"multiAZ": {"type":"boolean","default":false,"description":"a standby in another zone"},
		"backupRetentionDays": {"type":"integer","minimum":0,"maximum":35,"default":7},
		"applyImmediately": {"type":"boolean","description":"a config update: false leaves a disruptive change (the instance class) to the cloud's maintenance window; written by the update (docs/updates.md)"},
		"vpcID": {"type":"string","minLength":1,"description":"GCP: the VPC network to place the server on, with private services access (a network job's vpcID); omitted, the datastore gets a network of its own"}
	}
}`, engine, nameSchema, exampleVersion, storage))
}

var datastoreOutputs = []Output{
	{Name: "host", Type: "string", Description: "server address"},
	{Name: "port", Type: "integer"},
	{Name: "username", Type: "string", Description: "administrator user"},
	{Name: "secretRef", Type: "string", Description: "reference to the administrator password in the secret store", Secret: true},
	{Name: "resourceID", Type: "string", Description: "the provider's identifier"},
}

// BuiltinTypes returns fresh copies of the built-in catalog entries.
func BuiltinTypes() []Type {
	return []Type{
		{
			Pair: PairPostgres, Title: "PostgreSQL database server",
			Description: "RDS / Cloud SQL / Azure Database for PostgreSQL, or a local server.",
			Settings:    datastoreSchema("postgres", "16", true), Outputs: datastoreOutputs,
		},
		{
			Pair: PairMySQL, Title: "MySQL database server",
			Description: "RDS / Cloud SQL / Azure Database for MySQL, or a local MariaDB server.",
			Settings:    datastoreSchema("mysql", "8.0", true), Outputs: datastoreOutputs,
		},
		{
			Pair: PairRedis, Title: "Redis cache",
			Description: "ElastiCache / Memorystore / Azure Cache for Redis, or a local server.",
			Settings:    datastoreSchema("redis", "7", false), Outputs: datastoreOutputs,
		},
		{
			Pair: PairKubernetes, Title: "Kubernetes cluster",
			Description: "EKS / GKE / AKS control plane with node groups; registered as a space when ready.",
			Settings: json.RawMessage(`{
	"type": "object",
	"required": ["name", "nodeGroups"],
	"properties": {
		"name": ` + nameSchema + `,
		"version": {"type":"string","pattern":"^[0-9]+\\.[0-9]+$","default":"1.30","description":"Kubernetes minor version"},
		"nodeGroups": {
			"type": "array", "minItems": 1,
			"items": {
				"type": "object",
				"required": ["name", "instanceType", "min", "max"],
				"properties": {
					"name": ` + nameSchema + `,
					"instanceType": {"type":"string","minLength":1},
					"min": {"type":"integer","minimum":0},
					"max": {"type":"integer","minimum":1,"maximum":1000}
				}
			}
		},
		"vpcID": {"type":"string","minLength":1,"description":"an existing VPC; omitted, a network is created"},
		"subnetIDs": {"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true},
		"privateCluster": {"type":"boolean","default":false,"description":"the control plane's endpoint is reachable only from inside the cluster's network (EKS private endpoint access only, AKS private cluster); Groundwork must run where it can reach it, in the same VPC/VNet or a peered one, for the bootstrap components and the cluster space to work"}
	}
}`),
			Outputs: []Output{
				{Name: "clusterName", Type: "string"},
				{Name: "endpoint", Type: "string", Description: "API server URL"},
				{Name: "spaceID", Type: "string", Description: "the space the cluster was registered as"},
				{Name: "kubeconfigRef", Type: "string", Secret: true},
			},
			Check: checkKubernetes,
		},
		{
			Pair: PairVMPool, Title: "VM pool",
			Description: "VMs in a private subnet with NAT egress and an optional load balancer; no public SSH.",
			Settings: json.RawMessage(`{
	"type": "object",
	"required": ["name", "instanceType"],
	"properties": {
		"name": ` + nameSchema + `,
		"instanceType": {"type":"string","minLength":1},
		"min": {"type":"integer","minimum":0,"default":1},
		"max": {"type":"integer","minimum":1,"maximum":1000,"default":1},
		"desired": {"type":"integer","minimum":0,"maximum":1000,"description":"mode asg: the group's desired capacity, between min and max (default: min)"},
		"mode": {"type":"string","enum":["fixed","asg"],"default":"fixed"},
		"bare": {"type":"boolean","default":false,"description":"skip the NGINX bootstrap"},
		"createLoadBalancer": {"type":"boolean","default":false},
		"listenerPorts": {"type":"array","items":{"type":"integer","minimum":1,"maximum":65535},"uniqueItems":true,"default":[80,443]},
		"healthCheckPath": {"type":"string","pattern":"^/","default":"/healthz"},
		"healthCheckPort": {"type":"integer","minimum":1,"maximum":65535,"default":80},
		"domain": {"type":"string","pattern":"^([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+[a-z]{2,}$"},
		"zoneID": {"type":"string","minLength":1,"description":"the DNS zone (a dns_zone job's zone id) to put an A record of domain in, pointing at the load balancer"},
		"certificateArn": {"type":"string","minLength":1},
		"bootstrapTimeoutMinutes": {"type":"integer","minimum":1,"maximum":240,"default":20,"description":"how long a running VM may take to write its bootstrap sentinel before the pool fails with BootstrapTimeout"},
		"waitForBootstrap": {"type":"boolean","default":true,"description":"false: a running VM counts as ready without its bootstrap sentinel (images without the SSM agent or a way to the metadata server)"},
		"scalingPolicy": {"type":"object","required":["targetCPU"],"additionalProperties":false,"description":"mode asg only: a target-tracking policy keeping the group's average CPU near targetCPU percent","properties":{
			"targetCPU": {"type":"number","minimum":1,"maximum":100}
		}}
	}
}`),
			Outputs: []Output{
				{Name: "vmIDs", Type: "array"},
				{Name: "privateIPs", Type: "array"},
				{Name: "loadBalancerDNS", Type: "string"},
				{Name: "scalingGroupID", Type: "string"},
			},
			Check: checkVMPool,
		},
		{
			Pair: PairNetwork, Title: "Network",
			Description: "VPC / VNet with public and private subnets, NAT and optional peering.",
			Settings: json.RawMessage(`{
	"type": "object",
	"properties": {
		"cidr": {"type":"string","pattern":"^([0-9]{1,3}\\.){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2])$","default":"10.0.0.0/16"},
		"azCount": {"type":"integer","minimum":2,"maximum":6,"default":2},
		"vpcID": {"type":"string","minLength":1,"description":"adopt this network (AWS VPC id, GCP network, Azure VNet id) instead of making one; it is checked and never changed or deleted"},
		"subnetIDs": {"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true,"description":"with vpcID: the adopted network's subnets to use"},
		"existingVpcID": {"type":"string","minLength":1,"description":"the former name of vpcID, still accepted"},
		"noNAT": {"type":"boolean","description":"make no NAT gateway: the private subnets get no route to the internet"},
		"peering": {"type":"object","required":["peerVPCID"],"additionalProperties":false,"description":"a peering connection to another network (AWS VPC, GCP network, Azure VNet), with routes to it from every subnet; a config update adds, moves or removes it","properties":{
			"peerVPCID": {"type":"string","minLength":1,"description":"the peer's id: a VPC id, a GCP network's self link or name, an Azure VNet's resource id"},
			"peerOwnerID": {"type":"string","minLength":1,"description":"AWS: the peer VPC's account, when it is another account's"},
			"peerRegion": {"type":"string","minLength":1,"description":"AWS: the peer VPC's region, when it is another region's"}
		}},
		"peerVpcIDs": {"type":"array","items":{"type":"string","minLength":1},"uniqueItems":true,"maxItems":0,"default":[],"description":"kept so that configs stored with it stay valid; a network takes one peering, through peering"}
	}
}`),
			Outputs: []Output{
				{Name: "vpcID", Type: "string"},
				{Name: "publicSubnetIDs", Type: "array"},
				{Name: "privateSubnetIDs", Type: "array"},
				{Name: "natGatewayIDs", Type: "array"},
			},
			Check: checkNetwork,
		},
		{
			Pair: PairRegistry, Title: "Container registry",
			Description: "ECR / Artifact Registry / ACR repository.",
			Settings: json.RawMessage(`{
	"type": "object",
	"required": ["name"],
	"properties": {"name": ` + nameSchema + `}
}`),
			Outputs: []Output{{Name: "url", Type: "string"}, {Name: "resourceID", Type: "string"}},
		},
		{
			Pair: PairDNSZone, Title: "DNS zone",
			Description: "Route 53 / Cloud DNS / Azure DNS zone, public or private.",
			Settings: json.RawMessage(`{
	"type": "object",
	"required": ["domain"],
	"properties": {
		"domain": {"type":"string","pattern":"^([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+[a-z]{2,}\\.?$"},
		"private": {"type":"boolean","default":false}
	}
}`),
			Outputs: []Output{{Name: "zoneID", Type: "string"}, {Name: "nameServers", Type: "array"}},
		},
		{
			Pair: PairHelmComponent, Title: "Helm component",
			Description: "A component of the Helm catalog installed into a registered space.",
			Settings: json.RawMessage(`{
	"type": "object",
	"required": ["componentID"],
	"properties": {
		"componentID": {"type":"string","pattern":"^[a-z0-9][a-z0-9-]{0,62}$"},
		"namespace": {"type":"string","description":"namespace of the release; empty: the component's default"},
		"values": {"type":"object","default":{}}
	}
}`),
			Outputs: []Output{
				{Name: "releaseName", Type: "string"},
				{Name: "namespace", Type: "string"},
				{Name: "chartVersion", Type: "string"},
			},
		},
		{
			Pair: PairBucket, Title: "Bucket (example provisioner)",
			Description: "A directory per application, served by examples/provisioner; no built-in provisioner.",
			Settings: json.RawMessage(`{
	"type": "object",
	"properties": {
		"mode": {"type":"string","pattern":"^0?[0-7]{3}$","default":"0755","description":"directory permission bits, octal"},
		"description": {"type":"string","maxLength":1024,"default":""}
	}
}`),
			Outputs: []Output{{Name: "path", Type: "string", Description: "the directory on the provisioner's disk"}},
		},
	}
}

func checkKubernetes(cfg map[string]any) []FieldError {
	var out []FieldError
	groups, _ := cfg["nodeGroups"].([]any)
	seen := map[string]bool{}
	for i, g := range groups {
		m, _ := g.(map[string]any)
		out = append(out, minMax(m, fmt.Sprintf("nodeGroups[%d].", i))...)
		name, _ := m["name"].(string)
		if seen[name] {
			out = append(out, FieldError{Field: fmt.Sprintf("nodeGroups[%d].name", i), Rule: "unique", Message: fmt.Sprintf("node group %q appears twice", name)})
		}
		seen[name] = true
	}
	return out
}

func checkVMPool(cfg map[string]any) []FieldError {
	out := minMax(cfg, "")
	if _, ok := cfg["scalingPolicy"]; ok {
		// Only an Auto Scaling group scales on a policy; a fixed pool keeps its VMs.
		if mode, _ := cfg["mode"].(string); mode != "asg" {
			out = append(out, FieldError{Field: "scalingPolicy", Rule: "mode", Message: "a scaling policy needs mode asg"})
		}
	}
	if lb, _ := cfg["createLoadBalancer"].(bool); !lb {
		if _, ok := cfg["certificateArn"]; ok {
			out = append(out, FieldError{Field: "certificateArn", Rule: "dependentRequired", Message: "a certificate needs createLoadBalancer: true"})
		}
	}
	return out
}

func checkNetwork(cfg map[string]any) []FieldError {
	var out []FieldError
	_, adopt := cfg["vpcID"]
	_, former := cfg["existingVpcID"]
	if _, ok := cfg["subnetIDs"]; ok && !adopt && !former {
		out = append(out, FieldError{Field: "subnetIDs", Rule: "dependentRequired", Message: "subnets are named only for an adopted network: set vpcID"})
	}
	if adopt && former {
		out = append(out, FieldError{Field: "existingVpcID", Rule: "oneOf", Message: "existingVpcID is the former name of vpcID: send one of them"})
	}
	return out
}

// minMax checks min <= max; schema types were checked before, so both are numbers.
func minMax(m map[string]any, prefix string) []FieldError {
	lo, ok1 := number(m["min"])
	hi, ok2 := number(m["max"])
	if ok1 && ok2 && lo > hi {
		return []FieldError{{Field: prefix + "min", Rule: "maximum", Message: fmt.Sprintf("min (%v) must not exceed max (%v)", lo, hi)}}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	default:
		return 0, false
	}
}
