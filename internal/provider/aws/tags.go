package aws

import (
	"sort"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tag keys every resource carries, so that a re-run can find what an earlier run created and
// "already exists" can be told apart from somebody else's resource.
const (
	TagOrgID     = "groundwork:orgId"
	TagJobID     = "groundwork:jobId"
	TagRole      = "groundwork:role"
	TagManagedBy = "groundwork:managedBy"
	// ManagedBy is the value of TagManagedBy.
	ManagedBy = "groundwork"
)

// Tags identifies a job's resource: which org and job own it and what role it plays in the job
// (e.g. "vpc", "subnet-public-a").
type Tags struct {
	OrgID string
	JobID string
	Role  string
	// Extra holds the user's own tags (job.Tags); ours win on a clash.
	Extra map[string]string
}

// WithRole returns a copy of t for another resource of the same job.
func (t Tags) WithRole(role string) Tags { t.Role = role; return t }

// Map returns the full tag set.
func (t Tags) Map() map[string]string {
	m := make(map[string]string, len(t.Extra)+4)
	for k, v := range t.Extra {
		m[k] = v
	}
	m[TagOrgID] = t.OrgID
	m[TagJobID] = t.JobID
	m[TagRole] = t.Role
	m[TagManagedBy] = ManagedBy
	return m
}

// Owns reports whether tags (as read back from AWS) mark the resource as this job's.
func (t Tags) Owns(tags map[string]string) bool {
	return tags[TagJobID] == t.JobID && tags[TagOrgID] == t.OrgID && tags[TagManagedBy] == ManagedBy
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (t Tags) ec2() []ec2types.Tag {
	m := t.Map()
	out := make([]ec2types.Tag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, ec2types.Tag{Key: ptr(k), Value: ptr(m[k])})
	}
	return out
}

func (t Tags) ec2Spec(rt ec2types.ResourceType) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: t.ec2()}}
}

// ec2Filters selects this job's resource of t.Role.
func (t Tags) ec2Filters() []ec2types.Filter {
	return []ec2types.Filter{
		{Name: ptr("tag:" + TagJobID), Values: []string{t.JobID}},
		{Name: ptr("tag:" + TagRole), Values: []string{t.Role}},
	}
}

// ec2JobFilter selects everything of this job.
func (t Tags) ec2JobFilter() []ec2types.Filter {
	return []ec2types.Filter{{Name: ptr("tag:" + TagJobID), Values: []string{t.JobID}}}
}

func ec2TagMap(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, tg := range tags {
		m[deref(tg.Key)] = deref(tg.Value)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
