// Package dnszone is the dns_zone family's pipeline: validate → create zone → create records
// (skipped when none are given) → finalize.
package dnszone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/pipeline/steps"
)

// Step names and infra keys.
const (
	StepValidate = "validate"
	StepZone     = "create_zone"
	StepRecords  = "create_records"
	StepFinalize = "finalize"

	InfraZone    = "zone"
	InfraRecords = "records"
)

// Config is a DNS zone request.
type Config struct {
	// Domain is the zone's name as the catalog documents it; Name is accepted for older
	// requests and loses to Domain when both are given.
	Domain  string   `json:"domain,omitempty"`
	Name    string   `json:"name"`
	Private bool     `json:"private,omitempty"`
	VPCID   string   `json:"vpcID,omitempty"`
	Records []Record `json:"records,omitempty"`
}

// Record is one record set.
type Record struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	TTL    int64    `json:"ttl,omitempty"`
	Values []string `json:"values"`
}

// Zone is what the zone step records.
type Zone struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	NameServers []string `json:"nameServers,omitempty"`
}

// Driver is the cloud work.
type Driver interface {
	EnsureZone(ctx context.Context, j *job.Job, c Config) (Zone, error)
	DeleteZone(ctx context.Context, j *job.Job, name string) error
	UpsertRecord(ctx context.Context, zoneID string, r Record) error
	DeleteRecord(ctx context.Context, zoneID string, r Record) error
}

// Resolver finds the driver for a job.
type Resolver func(ctx context.Context, j *job.Job) (Driver, error)

// Pipeline is the dns_zone family's pipeline.
type Pipeline struct{ load steps.Loader[Config, Driver] }

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline.
func New(resolve Resolver) *Pipeline {
	return &Pipeline{load: steps.Loader[Config, Driver]{Decode: decode, Resolve: resolve}}
}

func (p *Pipeline) Family() job.Family      { return job.FamilyDNSZone }
func (p *Pipeline) LeaseTTL() time.Duration { return 2 * time.Minute }

func decode(raw json.RawMessage) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if c.Domain != "" {
		c.Name = c.Domain
	}
	name := strings.TrimSuffix(c.Name, ".")
	switch {
	case name == "" || !strings.Contains(name, "."):
		return c, errors.New("name: a domain such as apps.example.com")
	case c.Private && c.VPCID == "":
		return c, errors.New("vpcID: required for a private zone")
	}
	for i, r := range c.Records {
		if r.Name != name && !strings.HasSuffix(strings.TrimSuffix(r.Name, "."), "."+name) {
			return c, fmt.Errorf("records[%d].name: %q is not in zone %s", i, r.Name, name)
		}
		if r.Type == "" || len(r.Values) == 0 {
			return c, fmt.Errorf("records[%d]: type and values required", i)
		}
	}
	return c, nil
}

func (p *Pipeline) Validate(_ context.Context, j *job.Job) error {
	_, err := decode(j.Config)
	return err
}

func (p *Pipeline) Steps(*job.Job) []pipeline.Step {
	return []pipeline.Step{
		steps.Validate(StepValidate, p.Validate),
		steps.Resource[Config, Driver, Zone]{Name: StepZone, Key: InfraZone, Load: p.load, Ensure: Driver.EnsureZone, Delete: deleteZone}.Step(),
		{Name: StepRecords, Do: p.load.Do(p.records), Undo: p.load.Do(p.undoRecords)},
		steps.Finalize(StepFinalize),
	}
}

func deleteZone(d Driver, ctx context.Context, j *job.Job, c Config) error {
	return d.DeleteZone(ctx, j, c.Name)
}

func (p *Pipeline) records(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	if len(c.Records) == 0 {
		return pipeline.Skip("no records given"), nil
	}
	z, err := pipeline.InfraOf[Zone](r, InfraZone)
	if err != nil {
		return pipeline.Result{}, err
	}
	for _, rec := range c.Records {
		if err := d.UpsertRecord(ctx, z.ID, rec); err != nil {
			return pipeline.Result{}, err
		}
	}
	return pipeline.Done(map[string]any{InfraRecords: len(c.Records)}), nil
}

func (p *Pipeline) undoRecords(ctx context.Context, r *pipeline.Run, c Config, d Driver) (pipeline.Result, error) {
	var z Zone
	if ok, _ := r.Infra(InfraZone, &z); !ok {
		return pipeline.Skip("no zone recorded"), nil
	}
	for _, rec := range c.Records {
		if err := d.DeleteRecord(ctx, z.ID, rec); err != nil {
			return pipeline.Result{}, err
		}
	}
	return pipeline.Done(map[string]any{InfraRecords: nil}), nil
}
