package pricing

import (
	"os"
	"testing"
)

// The recorded answers in testdata are in each price list's real format; each holds prices
// the book keeps and ones it must skip (Windows, Spot, reserved, other engines).
func TestParsePriceLists(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		file  string
		parse func(f *os.File) ([]Entry, error)
		want  []Entry
	}{
		"aws ec2": {"aws-ec2-us-east-1.json", func(f *os.File) ([]Entry, error) { return ParseAWS(f) }, []Entry{
			{Cloud: "aws", Region: "us-east-1", SKU: "ec2.instance.m5.large", Unit: "hour", Price: 0.096, Date: "2026-11-20"},
			{Cloud: "aws", Region: "us-east-1", SKU: "vpc.nat", Unit: "hour", Price: 0.045, Date: "2026-11-20"},
			{Cloud: "aws", Region: "us-east-1", SKU: "vpc.nat.data", Unit: "GB", Price: 0.045, Date: "2026-11-20"},
		}},
		"aws rds": {"aws-rds-us-east-1.json", func(f *os.File) ([]Entry, error) { return ParseAWS(f) }, []Entry{
			{Cloud: "aws", Region: "us-east-1", SKU: "rds.postgres.db.t3.medium.multi-az", Unit: "hour", Price: 0.144, Date: "2026-11-18"},
		}},
		"azure": {"azure-retail-eastus.json", func(f *os.File) ([]Entry, error) { return ParseAzure(f) }, []Entry{
			{Cloud: "azure", Region: "eastus", SKU: "vm.Standard_D2s_v5", Unit: "hour", Price: 0.096, Date: "2026-10-01"},
		}},
		"gcp": {"gcp-compute-skus.json", func(f *os.File) ([]Entry, error) { return ParseGCP(f) }, []Entry{
			{Cloud: "gcp", Region: "us-central1", SKU: "gce.n2.core", Unit: "vCPU-hour", Price: 0.031611, Date: "2026-11-29"},
			{Cloud: "gcp", Region: "us-central1", SKU: "gce.n2.ram", Unit: "GiB-hour", Price: 0.004237, Date: "2026-11-29"},
			{Cloud: "gcp", Region: "us-east1", SKU: "gce.n2.core", Unit: "vCPU-hour", Price: 0.031611, Date: "2026-11-29"},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := tc.parse(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Source == "" {
					t.Fatalf("entry %d has no source", i)
				}
				g.Source = ""
				if g != w {
					t.Fatalf("entry %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestMergeReplacesAndKeeps(t *testing.T) {
	t.Parallel()
	b, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	before := len(b.Entries)
	m := b.Merge([]Entry{{Cloud: "aws", Region: "us-east-1", SKU: "ec2.instance.m5.large", Unit: "hour", Price: 0.1, Source: "s", Date: "2026-12-01"},
		{Cloud: "aws", Region: "eu-west-1", SKU: "ec2.instance.m5.large", Unit: "hour", Price: 0.107, Source: "s", Date: "2026-12-01"}}, "2026-12-01")
	if len(m.Entries) != before+1 || m.Date != "2026-12-01" {
		t.Fatalf("merged %d entries (from %d), date %s", len(m.Entries), before, m.Date)
	}
	if e, _ := m.Lookup("aws", "us-east-1", "ec2.instance.m5.large"); e.Price != 0.1 {
		t.Fatalf("replaced price = %v", e.Price)
	}
	raw, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(raw)
	if err != nil || len(again.Entries) != len(m.Entries) {
		t.Fatalf("round trip: %v", err)
	}
}
