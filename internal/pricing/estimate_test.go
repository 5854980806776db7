package pricing

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
)

func coster(t *testing.T) Coster {
	t.Helper()
	b, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return Coster{Book: b, Sources: map[string]UsageSource{"aws": AWS{}}}
}

// The totals were worked out by hand from the book's us-east-1 prices:
//
//	VM pool with LB: EC2 m5.large 2 × 0.096 × 730 = 140.16; ALB 0.0225 × 730 = 16.425 → 16.43;
//	  NAT gateway 0.045 × 730 = 32.85; public IPv4 (NAT 1 + ALB 2) 0.005 × 730 = 3.65 + 7.30;
//	  total 200.39, with the root volumes unknown.
//	RDS Multi-AZ: db.t3.medium PostgreSQL Multi-AZ 0.144 × 730 = 105.12; gp2 Multi-AZ storage
//	  100 × 0.23 = 23.00; total 128.12.
//	EKS with two node groups: cluster 0.10 × 730 = 73.00; m5.large 2 × 0.096 × 730 = 140.16;
//	  r5.xlarge 1 × 0.252 × 730 = 183.96; NAT 32.85; public IPv4 3.65; total 433.62, node
//	  volumes unknown.
func TestHandCheckedTotals(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		family   job.Family
		config   string
		total    float64
		lines    int
		complete bool
	}{
		"vm pool with LB":     {job.FamilyVMPool, `{"name":"checkout-edge","instanceType":"m5.large","min":2,"max":6,"createLoadBalancer":true,"listenerPorts":[80,443]}`, 200.39, 6, false},
		"rds multi-az":        {job.FamilyDatastore, `{"name":"orders-db","engine":"postgres","version":"16.3","instanceClass":"db.t3.medium","allocatedStorageGB":100,"multiAZ":true,"backupRetentionDays":7}`, 128.12, 2, true},
		"eks two node groups": {job.FamilyKubernetes, `{"name":"platform","version":"1.30","nodeGroups":[{"name":"general","instanceType":"m5.large","min":2,"max":6},{"name":"memory","instanceType":"r5.xlarge","min":1,"max":3}]}`, 433.62, 7, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := &job.Job{ID: "job_1", Family: tc.family, Provider: "aws", Mode: job.ModeCreate, Config: json.RawMessage(tc.config)}
			e, err := coster(t).Estimate(context.Background(), j, "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			if e.Total != tc.total || len(e.Lines) != tc.lines || e.Complete != tc.complete || e.Currency != "USD" || e.PriceBookDate == "" {
				b, _ := json.MarshalIndent(e, "", " ")
				t.Fatalf("estimate = %s; want total %.2f over %d lines, complete %v", b, tc.total, tc.lines, tc.complete)
			}
			sum := 0.0
			for _, l := range e.Lines {
				if l.Known {
					sum += *l.Monthly
				} else if l.UnitPrice != nil || l.Monthly != nil || l.Note == "" {
					t.Fatalf("unknown line %+v carries a price or no reason", l)
				}
			}
			if cents(sum) != e.Total {
				t.Fatalf("lines sum to %.2f, total %.2f", sum, e.Total)
			}
		})
	}
}

func TestMissingPriceIsUnknownNeverZero(t *testing.T) {
	t.Parallel()
	j := &job.Job{ID: "job_1", Family: job.FamilyVMPool, Provider: "aws", Mode: job.ModeCreate,
		Config: json.RawMessage(`{"name":"w","instanceType":"m5.large","min":1,"max":1}`)}
	e, err := coster(t).Estimate(context.Background(), j, "ap-southeast-7") // a region the book lacks
	if err != nil {
		t.Fatal(err)
	}
	if e.Complete || e.Total != 0 || len(e.Lines) == 0 {
		t.Fatalf("estimate = %+v", e)
	}
	for _, l := range e.Lines {
		if l.Known || l.Monthly != nil || l.UnitPrice != nil || l.Note == "" {
			t.Fatalf("line %+v: want unknown with a reason and no price", l)
		}
	}
	// One instance type the book lacks in a region it has: that line alone is unknown.
	j.Config = json.RawMessage(`{"name":"w","instanceType":"x9.huge","min":1,"max":1}`)
	e, _ = coster(t).Estimate(context.Background(), j, "us-east-1")
	var unknown []plan.Line
	for _, l := range e.Lines {
		if !l.Known {
			unknown = append(unknown, l)
		}
	}
	if len(unknown) != 2 || unknown[0].Item != "EC2 x9.huge" || e.Total != 36.5 {
		t.Fatalf("unknown lines %+v, total %.2f; want EC2 x9.huge and the root volume, total 36.50 (NAT and its IP)", unknown, e.Total)
	}
}

func TestLocalCostsNothingKnown(t *testing.T) {
	t.Parallel()
	j := &job.Job{ID: "job_1", Family: job.FamilyDatastore, Provider: "local", Mode: job.ModeCreate, Config: json.RawMessage(`{"engine":"postgres"}`)}
	e, err := coster(t).Estimate(context.Background(), j, "local")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Lines) != 1 || !e.Lines[0].Known || *e.Lines[0].Monthly != 0 || e.Lines[0].Note != "local: no cloud cost" || e.Total != 0 || !e.Complete {
		t.Fatalf("local estimate = %+v", e)
	}
}
