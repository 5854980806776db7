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

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
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
type Pipeline struct{ resolve Resolver }

var _ pipeline.Pipeline = (*Pipeline)(nil)

// New returns the pipeline.
func New(resolve Resolver) *Pipeline { return &Pipeline{resolve: resolve} }

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
		{Name: StepValidate, Do: func(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
			if err := p.Validate(ctx, r.Job); err != nil {
				return pipeline.Result{}, fault.UserAction(err, "InvalidConfig", err.Error(), "")
			}
			return pipeline.Done(nil), nil
		}},
		{Name: StepZone, Do: p.zone, Undo: p.undoZone},
		{Name: StepRecords, Do: p.records, Undo: p.undoRecords},
		{Name: StepFinalize, Do: func(context.Context, *pipeline.Run) (pipeline.Result, error) { return pipeline.Done(nil), nil }},
	}
}

func (p *Pipeline) load(ctx context.Context, r *pipeline.Run) (Config, Driver, error) {
	c, err := decode(r.Job.Config)
	if err != nil {
		return c, nil, fault.UserAction(err, "InvalidConfig", err.Error(), "")
	}
	d, err := p.resolve(ctx, r.Job)
	return c, d, err
}

func (p *Pipeline) zone(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, d, err := p.load(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	z, err := d.EnsureZone(ctx, r.Job, c)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraZone: z}), nil
}

func (p *Pipeline) undoZone(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, d, err := p.load(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	return pipeline.Done(map[string]any{InfraZone: nil}), d.DeleteZone(ctx, r.Job, c.Name)
}

func (p *Pipeline) records(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, d, err := p.load(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if len(c.Records) == 0 {
		return pipeline.Skip("no records given"), nil
	}
	var z Zone
	if ok, err := r.Infra(InfraZone, &z); err != nil || !ok {
		return pipeline.Result{}, fault.System(fmt.Errorf("infra zone missing: %v", err))
	}
	for _, rec := range c.Records {
		if err := d.UpsertRecord(ctx, z.ID, rec); err != nil {
			return pipeline.Result{}, err
		}
	}
	return pipeline.Done(map[string]any{InfraRecords: len(c.Records)}), nil
}

func (p *Pipeline) undoRecords(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	c, d, err := p.load(ctx, r)
	if err != nil {
		return pipeline.Result{}, err
	}
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
