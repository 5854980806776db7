package gcp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Label keys every resource that takes labels carries. GCP label keys and values are
// lower-case letters, digits, '-' and '_', at most 63 characters, so ids are lower-cased.
const (
	LabelJob       = "groundwork-job"
	LabelOrg       = "groundwork-org"
	LabelRole      = "groundwork-role"
	LabelManagedBy = "groundwork-managed-by"
	managedBy      = "groundwork"
)

var errNotOurs = errors.New("a resource with the job's name belongs to something else")

var notLabel = regexp.MustCompile(`[^a-z0-9_-]+`)

// labelValue is v as a label value: lower-case, only the allowed characters, at most 63.
func labelValue(v string) string {
	v = notLabel.ReplaceAllString(strings.ToLower(v), "-")
	if len(v) > 63 {
		v = v[:63]
	}
	return v
}

// labels are a job's resource's labels: the user's own tags that make valid labels, and
// ours, which win a clash.
func labels(j *job.Job, role string) map[string]string {
	m := make(map[string]string, len(j.Tags)+4)
	for k, v := range j.Tags {
		if lk := labelValue(k); lk != "" && lk[0] >= 'a' && lk[0] <= 'z' {
			m[lk] = labelValue(v)
		}
	}
	m[LabelJob] = labelValue(j.ID)
	m[LabelOrg] = labelValue(j.OrgID)
	m[LabelRole] = role
	m[LabelManagedBy] = managedBy
	return m
}

// owns reports whether labels read back from Google mark the resource as j's.
func owns(j *job.Job, l map[string]string) bool {
	return l[LabelJob] == labelValue(j.ID) && l[LabelOrg] == labelValue(j.OrgID) && l[LabelManagedBy] == managedBy
}

// description marks a resource of an API without labels (a VPC network, a firewall rule, a
// router) as j's.
func description(j *job.Job, role string) string {
	return fmt.Sprintf("Managed by Groundwork. %s=%s %s=%s %s=%s", LabelJob, j.ID, LabelOrg, j.OrgID, LabelRole, role)
}

// ownsDescription reports whether a description read back marks the resource as j's.
func ownsDescription(j *job.Job, d string) bool {
	return strings.Contains(d, LabelJob+"="+j.ID+" ") && strings.Contains(d, LabelOrg+"="+j.OrgID+" ")
}

// JobOfDescription is the job id a description written by description names, or "".
func JobOfDescription(d string) string {
	_, rest, ok := strings.Cut(d, LabelJob+"=")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
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

// name is the deterministic name of a job's resource in role ("gw-<key>-<role>"): a create
// re-sent after a crash names the same resource, which Google refuses as ALREADY_EXISTS
// instead of making a second one. GCP names start with a letter and hold lower-case letters,
// digits and '-'.
func name(j *job.Job, role string) string { return "gw-" + jobKey(j) + "-" + role }

// requestID is the requestId of a job's mutating call named by key: the same call re-sent
// after a crash carries the same id, and Google answers it with the first call's operation.
// Google wants a UUID, so the id is a version-5-shaped hash of the job and the key.
func requestID(j *job.Job, key string) string {
	s := sha256.Sum256([]byte(j.ID + "\x00" + key))
	s[6] = (s[6] & 0x0f) | 0x50
	s[8] = (s[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}
