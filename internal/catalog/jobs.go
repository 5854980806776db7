package catalog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/groundworkhq/groundwork/internal/job"
)

var familyPairs = map[job.Family]Pair{
	job.FamilyKubernetes: PairKubernetes,
	job.FamilyVMPool:     PairVMPool,
	job.FamilyNetwork:    PairNetwork,
	job.FamilyRegistry:   PairRegistry,
	job.FamilyDNSZone:    PairDNSZone,
	job.FamilyComponent:  PairHelmComponent,
}

// PairForJob maps a job's family (the jobs API's "kind") to its catalog pair. A datastore's pair
// depends on its config's engine. A family spelled "category/type" names a pair directly: that
// is how a job for a pair held by a remote provisioner is submitted.
//
// The error is a *ValidationError when the config decides and is wrong (a datastore without a
// known engine), so that the API can answer with field errors.
func PairForJob(family job.Family, config json.RawMessage) (Pair, error) {
	if p, ok := familyPairs[family]; ok {
		return p, nil
	}
	if family == job.FamilyDatastore {
		var c struct {
			Engine any `json:"engine"`
		}
		if len(config) > 0 {
			if err := json.Unmarshal(config, &c); err != nil {
				return Pair{}, &ValidationError{Pair: Pair{Kind: CategoryManagedResource, Type: "datastore"}, Fields: []FieldError{{Rule: "json", Message: "config is not a JSON object: " + err.Error()}}}
			}
		}
		engine, _ := c.Engine.(string)
		switch engine {
		case "postgres", "mysql", "redis":
			return Pair{Kind: CategoryManagedResource, Type: engine}, nil
		}
		fe := FieldError{Field: "engine", Rule: "enum", Message: `must be one of "postgres", "mysql", "redis"`}
		if c.Engine == nil {
			fe = FieldError{Field: "engine", Rule: "required", Message: "is required"}
		}
		return Pair{}, &ValidationError{Pair: Pair{Kind: CategoryManagedResource, Type: "datastore"}, Fields: []FieldError{fe}}
	}
	if strings.Contains(string(family), "/") {
		return ParsePair(string(family))
	}
	return Pair{}, fmt.Errorf("family %q: %w", family, ErrUnknownType)
}

// ValidateJob is PairForJob then Validate: it returns the pair and the config with defaults.
func (c *Catalog) ValidateJob(family job.Family, config json.RawMessage) (Pair, json.RawMessage, error) {
	p, err := PairForJob(family, config)
	if err != nil {
		return Pair{}, nil, err
	}
	out, err := c.Validate(p, config)
	if err != nil {
		return p, nil, err
	}
	return p, out, nil
}

// FamilyForPair is the inverse of PairForJob: the job family that serves pair. A pair with no
// built-in family is its own family ("category/type"), served by a remote provisioner.
func FamilyForPair(p Pair) job.Family {
	for f, fp := range familyPairs {
		if fp == p {
			return f
		}
	}
	switch p {
	case PairPostgres, PairMySQL, PairRedis:
		return job.FamilyDatastore
	}
	return job.Family(p.String())
}
