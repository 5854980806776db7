package catalog_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/job"
)

func builtin(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Builtin()
	if err != nil {
		t.Fatalf("Builtin: %v", err)
	}
	return c
}

// TestInvalidConfigs walks every built-in type with configs that break one rule each and checks
// that the refusal names the field and the rule.
func TestInvalidConfigs(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	cases := []struct {
		name   string
		pair   catalog.Pair
		config string
		field  string
		rule   string
	}{
		{"postgres wrong engine", catalog.PairPostgres, `{"engine":"mysql"}`, "engine", "enum"},
		{"postgres storage too small", catalog.PairPostgres, `{"engine":"postgres","allocatedStorageGB":1}`, "allocatedStorageGB", "minimum"},
		{"postgres storage as string", catalog.PairPostgres, `{"engine":"postgres","allocatedStorageGB":"50"}`, "allocatedStorageGB", "type"},
		{"postgres multiAZ not bool", catalog.PairPostgres, `{"engine":"postgres","multiAZ":"yes"}`, "multiAZ", "type"},
		{"postgres retention too long", catalog.PairPostgres, `{"engine":"postgres","backupRetentionDays":90}`, "backupRetentionDays", "maximum"},
		{"postgres bad name", catalog.PairPostgres, `{"engine":"postgres","name":"Bad_Name"}`, "name", "pattern"},
		{"mysql empty version", catalog.PairMySQL, `{"engine":"mysql","version":""}`, "version", "minLength"},
		{"mysql not an object", catalog.PairMySQL, `[1,2]`, "", "type"},
		{"postgres empty vpcID", catalog.PairPostgres, `{"engine":"postgres","vpcID":""}`, "vpcID", "minLength"},
		{"redis vpcID not a string", catalog.PairRedis, `{"engine":"redis","vpcID":7}`, "vpcID", "type"},
		{"redis empty instance class", catalog.PairRedis, `{"engine":"redis","instanceClass":""}`, "instanceClass", "minLength"},
		{"kubernetes name missing", catalog.PairKubernetes, `{"nodeGroups":[{"name":"a","instanceType":"m5.large","min":1,"max":2}]}`, "name", "required"},
		{"kubernetes no node groups", catalog.PairKubernetes, `{"name":"c","nodeGroups":[]}`, "nodeGroups", "minItems"},
		{"kubernetes node group min negative", catalog.PairKubernetes, `{"name":"c","nodeGroups":[{"name":"a","instanceType":"m5.large","min":-1,"max":2}]}`, "nodeGroups[0].min", "minimum"},
		{"kubernetes node group max missing", catalog.PairKubernetes, `{"name":"c","nodeGroups":[{"name":"a","instanceType":"m5.large","min":1}]}`, "nodeGroups[0].max", "required"},
		{"kubernetes second group min > max", catalog.PairKubernetes, `{"name":"c","nodeGroups":[{"name":"a","instanceType":"m5.large","min":1,"max":2},{"name":"b","instanceType":"m5.large","min":5,"max":2}]}`, "nodeGroups[1].min", "maximum"},
		{"kubernetes duplicate group", catalog.PairKubernetes, `{"name":"c","nodeGroups":[{"name":"a","instanceType":"t","min":1,"max":2},{"name":"a","instanceType":"t","min":1,"max":2}]}`, "nodeGroups[1].name", "unique"},
		{"kubernetes bad version", catalog.PairKubernetes, `{"name":"c","version":"latest","nodeGroups":[{"name":"a","instanceType":"t","min":1,"max":2}]}`, "version", "pattern"},
		{"kubernetes subnet not string", catalog.PairKubernetes, `{"name":"c","subnetIDs":[1],"nodeGroups":[{"name":"a","instanceType":"t","min":1,"max":2}]}`, "subnetIDs[0]", "type"},
		{"kubernetes privateCluster not bool", catalog.PairKubernetes, `{"name":"c","privateCluster":"true","nodeGroups":[{"name":"a","instanceType":"t","min":1,"max":2}]}`, "privateCluster", "type"},
		{"vm pool instance type missing", catalog.PairVMPool, `{"name":"p"}`, "instanceType", "required"},
		{"vm pool bad mode", catalog.PairVMPool, `{"name":"p","instanceType":"t","mode":"spot"}`, "mode", "enum"},
		{"vm pool port out of range", catalog.PairVMPool, `{"name":"p","instanceType":"t","listenerPorts":[80,70000]}`, "listenerPorts[1]", "maximum"},
		{"vm pool min > max", catalog.PairVMPool, `{"name":"p","instanceType":"t","min":3,"max":2}`, "min", "maximum"},
		{"vm pool health path", catalog.PairVMPool, `{"name":"p","instanceType":"t","healthCheckPath":"healthz"}`, "healthCheckPath", "pattern"},
		{"vm pool bootstrap timeout too long", catalog.PairVMPool, `{"name":"p","instanceType":"t","bootstrapTimeoutMinutes":241}`, "bootstrapTimeoutMinutes", "maximum"},
		{"vm pool bootstrap timeout zero", catalog.PairVMPool, `{"name":"p","instanceType":"t","bootstrapTimeoutMinutes":0}`, "bootstrapTimeoutMinutes", "minimum"},
		{"vm pool waitForBootstrap not bool", catalog.PairVMPool, `{"name":"p","instanceType":"t","waitForBootstrap":"no"}`, "waitForBootstrap", "type"},
		{"vm pool scaling policy on a fixed pool", catalog.PairVMPool, `{"name":"p","instanceType":"t","scalingPolicy":{"targetCPU":50}}`, "scalingPolicy", "mode"},
		{"vm pool scaling target above 100", catalog.PairVMPool, `{"name":"p","instanceType":"t","mode":"asg","scalingPolicy":{"targetCPU":101}}`, "scalingPolicy.targetCPU", "maximum"},
		{"vm pool scaling target zero", catalog.PairVMPool, `{"name":"p","instanceType":"t","mode":"asg","scalingPolicy":{"targetCPU":0}}`, "scalingPolicy.targetCPU", "minimum"},
		{"vm pool scaling policy without target", catalog.PairVMPool, `{"name":"p","instanceType":"t","mode":"asg","scalingPolicy":{}}`, "scalingPolicy.targetCPU", "required"},
		{"vm pool certificate without lb", catalog.PairVMPool, `{"name":"p","instanceType":"t","certificateArn":"arn:x"}`, "certificateArn", "dependentRequired"},
		{"network bad cidr", catalog.PairNetwork, `{"cidr":"10.0.0.0"}`, "cidr", "pattern"},
		{"network too many zones", catalog.PairNetwork, `{"azCount":9}`, "azCount", "maximum"},
		{"network duplicate peers", catalog.PairNetwork, `{"peerVpcIDs":["vpc-1","vpc-1"]}`, "peerVpcIDs", "uniqueItems"},
		{"network subnets without a network", catalog.PairNetwork, `{"subnetIDs":["subnet-1"]}`, "subnetIDs", "dependentRequired"},
		{"network adopted twice", catalog.PairNetwork, `{"vpcID":"vpc-1","existingVpcID":"vpc-2"}`, "existingVpcID", "oneOf"},
		{"network one zone", catalog.PairNetwork, `{"azCount":1}`, "azCount", "minimum"},
		{"network peers as a list", catalog.PairNetwork, `{"peerVpcIDs":["vpc-1"]}`, "peerVpcIDs", "maxItems"},
		{"network peering without a peer", catalog.PairNetwork, `{"peering":{"peerRegion":"eu-west-1"}}`, "peering.peerVPCID", "required"},
		{"network peering unknown key", catalog.PairNetwork, `{"peering":{"peerVPCID":"vpc-1","peer":"x"}}`, "peering", "additionalProperties"},
		{"registry name missing", catalog.PairRegistry, `{}`, "name", "required"},
		{"dns zone bad domain", catalog.PairDNSZone, `{"domain":"not a domain"}`, "domain", "pattern"},
		{"dns zone private not bool", catalog.PairDNSZone, `{"domain":"example.com","private":1}`, "private", "type"},
		{"helm component missing id", catalog.PairHelmComponent, `{"values":{}}`, "componentID", "required"},
		{"helm component values not object", catalog.PairHelmComponent, `{"componentID":"ingress-nginx","values":[]}`, "values", "type"},
		{"bucket bad mode", catalog.PairBucket, `{"mode":"rwx"}`, "mode", "pattern"},
		{"not json", catalog.PairRegistry, `{`, "", "json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Validate(tc.pair, json.RawMessage(tc.config))
			var ve *catalog.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate(%s) = %v, want *ValidationError", tc.config, err)
			}
			if !slices.ContainsFunc(ve.Fields, func(f catalog.FieldError) bool { return f.Field == tc.field && f.Rule == tc.rule }) {
				t.Fatalf("fields %+v lack {field %q rule %q}", ve.Fields, tc.field, tc.rule)
			}
			for _, f := range ve.Fields {
				if f.Message == "" {
					t.Errorf("field error %+v has no message", f)
				}
			}
		})
	}
}

// TestEveryBuiltinCovered keeps TestInvalidConfigs honest: a new built-in type without an
// invalid case would slip through.
func TestEveryBuiltinCovered(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	want := map[catalog.Pair]bool{}
	for _, p := range catalog.BuiltinPairs() {
		want[p] = true
	}
	for _, ty := range c.Types() {
		if len(ty.Outputs) == 0 {
			t.Errorf("%s declares no outputs", ty.Pair)
		}
		delete(want, ty.Pair)
	}
	if len(want) > 0 {
		t.Fatalf("built-in pairs missing from the catalog: %v", want)
	}
}

func TestDefaultsApplied(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	cases := []struct {
		name   string
		pair   catalog.Pair
		config string
		want   string
	}{
		{"postgres", catalog.PairPostgres, `{"engine":"postgres","version":"15"}`,
			`{"allocatedStorageGB":20,"backupRetentionDays":7,"engine":"postgres","multiAZ":false,"version":"15"}`},
		{"redis has no storage", catalog.PairRedis, `{"engine":"redis"}`,
			`{"backupRetentionDays":7,"engine":"redis","multiAZ":false}`},
		{"vm pool", catalog.PairVMPool, `{"name":"edge","instanceType":"m5.large","max":4}`,
			`{"bare":false,"bootstrapTimeoutMinutes":20,"createLoadBalancer":false,"healthCheckPath":"/healthz","healthCheckPort":80,"instanceType":"m5.large","listenerPorts":[80,443],"max":4,"min":1,"mode":"fixed","name":"edge","waitForBootstrap":true}`},
		{"network empty", catalog.PairNetwork, ``, `{"azCount":2,"cidr":"10.0.0.0/16","peerVpcIDs":[]}`},
		{"network peering", catalog.PairNetwork, `{"peering":{"peerVPCID":"vpc-0abc"}}`, `{"azCount":2,"cidr":"10.0.0.0/16","peerVpcIDs":[],"peering":{"peerVPCID":"vpc-0abc"}}`},
		{"kubernetes keeps user values", catalog.PairKubernetes,
			`{"name":"c","version":"1.29","nodeGroups":[{"name":"a","instanceType":"t","min":0,"max":1}]}`,
			`{"name":"c","nodeGroups":[{"instanceType":"t","max":1,"min":0,"name":"a"}],"privateCluster":false,"version":"1.29"}`},
		{"kubernetes private cluster", catalog.PairKubernetes,
			`{"name":"c","privateCluster":true,"nodeGroups":[{"name":"a","instanceType":"t","min":0,"max":1}]}`,
			`{"name":"c","nodeGroups":[{"instanceType":"t","max":1,"min":0,"name":"a"}],"privateCluster":true,"version":"1.30"}`},
		{"helm values default", catalog.PairHelmComponent, `{"componentID":"cert-manager"}`, `{"componentID":"cert-manager","values":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.Validate(tc.pair, json.RawMessage(tc.config))
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if string(got) != tc.want {
				t.Fatalf("config with defaults:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestPairForJob(t *testing.T) {
	t.Parallel()
	cases := []struct {
		family job.Family
		config string
		want   catalog.Pair
		rule   string // when an error is expected: the rule on field engine, or "" for a plain error
		fails  bool
	}{
		{family: job.FamilyKubernetes, want: catalog.PairKubernetes},
		{family: job.FamilyVMPool, want: catalog.PairVMPool},
		{family: job.FamilyNetwork, want: catalog.PairNetwork},
		{family: job.FamilyRegistry, want: catalog.PairRegistry},
		{family: job.FamilyDNSZone, want: catalog.PairDNSZone},
		{family: job.FamilyComponent, want: catalog.PairHelmComponent},
		{family: job.FamilyDatastore, config: `{"engine":"postgres"}`, want: catalog.PairPostgres},
		{family: job.FamilyDatastore, config: `{"engine":"mysql"}`, want: catalog.PairMySQL},
		{family: job.FamilyDatastore, config: `{"engine":"redis"}`, want: catalog.PairRedis},
		{family: job.FamilyDatastore, config: `{"engine":"oracle"}`, rule: "enum", fails: true},
		{family: job.FamilyDatastore, config: `{}`, rule: "required", fails: true},
		{family: "managed-resource/bucket", want: catalog.PairBucket},
		{family: "artifact/image", fails: true},
		{family: "spaceship", fails: true},
	}
	for _, tc := range cases {
		t.Run(string(tc.family)+tc.config, func(t *testing.T) {
			t.Parallel()
			got, err := catalog.PairForJob(tc.family, json.RawMessage(tc.config))
			if tc.fails {
				if err == nil {
					t.Fatalf("PairForJob = %v, want error", got)
				}
				var ve *catalog.ValidationError
				if tc.rule != "" && (!errors.As(err, &ve) || ve.Fields[0].Field != "engine" || ve.Fields[0].Rule != tc.rule) {
					t.Fatalf("err = %v, want field engine rule %s", err, tc.rule)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("PairForJob = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCatalogAddAndUnknown(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	if err := c.Add(catalog.Type{Pair: catalog.PairPostgres}); err == nil {
		t.Fatal("adding a pair twice succeeded")
	}
	if err := c.Add(catalog.Type{Pair: catalog.Pair{Kind: "artifact", Type: "x"}}); err == nil {
		t.Fatal("adding a pair of an unknown category succeeded")
	}
	if err := c.Add(catalog.Type{Pair: catalog.Pair{Kind: catalog.CategoryTool, Type: "bad"}, Settings: json.RawMessage(`{"type":"nope"}`)}); err == nil {
		t.Fatal("adding a broken schema succeeded")
	}
	q := catalog.Pair{Kind: catalog.CategoryConsumedResource, Type: "queue"}
	if err := c.Add(catalog.Type{Pair: q, Settings: json.RawMessage(`{"type":"object","required":["topic"]}`)}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if _, err := c.Validate(q, json.RawMessage(`{"topic":"orders"}`)); err != nil {
		t.Fatalf("Validate added type: %v", err)
	}
	if _, err := c.Validate(catalog.Pair{Kind: catalog.CategoryTool, Type: "missing"}, nil); !errors.Is(err, catalog.ErrUnknownType) {
		t.Fatalf("unknown pair: err = %v, want ErrUnknownType", err)
	}
}

func TestFamilyForPairRoundTrips(t *testing.T) {
	t.Parallel()
	for _, p := range append(catalog.BuiltinPairs(), catalog.PairBucket) {
		f := catalog.FamilyForPair(p)
		cfg := json.RawMessage(`{"engine":"` + p.Type + `"}`)
		if got, err := catalog.PairForJob(f, cfg); err != nil || got != p {
			t.Errorf("PairForJob(FamilyForPair(%s) = %s) = %v, %v", p, f, got, err)
		}
	}
}

// Unknown keys inside a config are refused, naming the field (at any depth), unless the
// schema says the object takes extras or declares no properties at all.
func TestUnknownSettingsRefused(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	open, err := catalog.New(catalog.Type{Pair: catalog.Pair{Kind: catalog.CategoryTool, Type: "open"},
		Settings: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	openPair := catalog.Pair{Kind: catalog.CategoryTool, Type: "open"}
	cases := []struct {
		name    string
		cat     *catalog.Catalog
		pair    catalog.Pair
		config  string
		field   string // "" means accepted
		suggest string
	}{
		{"typo at the top", c, catalog.PairPostgres, `{"engine":"postgres","nmae":"x"}`, "nmae", `"name"`},
		{"stranger at the top", c, catalog.PairRegistry, `{"name":"r","colour":"blue"}`, "colour", ""},
		{"typo in a node group", c, catalog.PairKubernetes, `{"name":"c","nodeGroups":[{"name":"a","instanceType":"t","min":1,"max":2,"instanceTyp":"x"}]}`, "nodeGroups[0].instanceTyp", `"instanceType"`},
		{"free-form values", c, catalog.PairHelmComponent, `{"componentID":"ingress-nginx","values":{"anything":{"goes":1}}}`, "", ""},
		{"schema allows extras", open, openPair, `{"a":"x","b":2}`, "", ""},
		{"known keys only", c, catalog.PairPostgres, `{"engine":"postgres","name":"db"}`, "", ""},
		{"a datastore on a network job's network", c, catalog.PairRedis, `{"engine":"redis","vpcID":"projects/p/global/networks/gw-vpc"}`, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.cat.Validate(tc.pair, json.RawMessage(tc.config))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *catalog.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("accepted or wrong error: %v", err)
			}
			i := slices.IndexFunc(ve.Fields, func(f catalog.FieldError) bool {
				return f.Field == tc.field && f.Rule == "additionalProperties"
			})
			if i < 0 {
				t.Fatalf("fields %+v do not name %s", ve.Fields, tc.field)
			}
			if tc.suggest != "" && !strings.Contains(ve.Fields[i].Message, "did you mean "+tc.suggest) {
				t.Fatalf("no suggestion in %q", ve.Fields[i].Message)
			}
		})
	}
}

// A datastore pair fixes its engine: a config without one (a provisioner-protocol call names
// the pair, not the engine) gets the pair's.
func TestDatastoreEngineFromPair(t *testing.T) {
	t.Parallel()
	c := builtin(t)
	for _, p := range []catalog.Pair{catalog.PairPostgres, catalog.PairMySQL, catalog.PairRedis} {
		out, err := c.Validate(p, json.RawMessage(`{"name":"cache"}`))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var cfg struct{ Engine string }
		if err := json.Unmarshal(out, &cfg); err != nil || cfg.Engine != p.Type {
			t.Fatalf("%s: engine %q (%v), want %q", p, cfg.Engine, err, p.Type)
		}
	}
}
