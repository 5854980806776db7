package azure

import (
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Tag keys every resource carries. Lower-case with hyphens: valid on every Azure resource
// type, including those whose tag names may not hold a colon.
const (
	TagJob       = "groundwork-job"
	TagOrg       = "groundwork-org"
	TagRole      = "groundwork-role"
	TagSpace     = "groundwork-space"
	TagManagedBy = "groundwork-managed-by"
	managedBy    = "groundwork"
)

// tags are a job's resource's tags: the user's own (job.Tags) and ours, which win a clash.
func tags(j *job.Job, role string) map[string]*string {
	m := make(map[string]*string, len(j.Tags)+4)
	for k, v := range j.Tags {
		m[k] = to.Ptr(v)
	}
	m[TagJob] = to.Ptr(j.ID)
	m[TagOrg] = to.Ptr(j.OrgID)
	m[TagRole] = to.Ptr(role)
	m[TagManagedBy] = to.Ptr(managedBy)
	return m
}

// owns reports whether tags read back from Azure mark the resource as j's.
func owns(j *job.Job, t map[string]*string) bool {
	get := func(k string) string {
		if v := t[k]; v != nil {
			return *v
		}
		return ""
	}
	return get(TagJob) == j.ID && get(TagOrg) == j.OrgID && get(TagManagedBy) == managedBy
}

var notAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// jobKey is the part of a job id that names its resources: the id's random tail, lower-case.
func jobKey(j *job.Job) string {
	k := notAlnum.ReplaceAllString(strings.ToLower(j.ID), "")
	if len(k) > 12 {
		k = k[len(k)-12:]
	}
	return k
}

// name is the deterministic name of a job's resource in role: a re-sent PUT after a crash
// names the same resource and so cannot make a second one.
func name(j *job.Job, role string) string { return "gw-" + jobKey(j) + "-" + role }

// GroupName is the resource group a space's resources go in when the space names none.
func GroupName(spaceID string) string {
	return "groundwork-" + notAlnum.ReplaceAllString(strings.ToLower(spaceID), "-")
}
