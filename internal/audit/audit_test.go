package audit

import (
	"bytes"
	"encoding/csv"
	"errors"
	"net/url"
	"testing"
	"time"
)

func TestParseFilter(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		query     string
		wantErr   string // the field named, "" for success
		wantLimit int
		wantPage  int
		scopes    int
	}{
		"defaults":         {"", "", DefaultLimit, 1, 0},
		"limit and page":   {"limit=200&page=3", "", 200, 3, 0},
		"scopes":           {"scope=provisioning,platform", "", DefaultLimit, 1, 2},
		"limit over 200":   {"limit=201", "limit", 0, 0, 0},
		"limit zero":       {"limit=0", "limit", 0, 0, 0},
		"page zero":        {"page=0", "page", 0, 0, 0},
		"unknown scope":    {"scope=provisioning,billing", "scope", 0, 0, 0},
		"bad from":         {"from=yesterday", "from", 0, 0, 0},
		"good time window": {"from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z", "", DefaultLimit, 1, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, _ := url.ParseQuery(c.query)
			f, err := ParseFilter("org1", q.Get)
			var fe *FieldError
			if c.wantErr != "" {
				if !errors.As(err, &fe) || fe.Field != c.wantErr || !errors.Is(err, ErrBadFilter) {
					t.Fatalf("err = %v, want field %s", err, c.wantErr)
				}
				return
			}
			if err != nil || f.Limit != c.wantLimit || f.Page != c.wantPage || len(f.Scopes) != c.scopes || f.OrgID != "org1" {
				t.Fatalf("filter %+v, %v", f, err)
			}
		})
	}
}

func TestCSVQuotesMetadata(t *testing.T) {
	t.Parallel()
	e := New("org1", ScopePlatform, "role.create", "a@example.com", "role", "role_1", map[string]any{"name": `x,"y"`})
	e.ID, e.CreatedAt = "aud_1", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	if err := WriteCSV(&buf, []*Entry{e}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 2 || rows[1][6] != `{"name":"x,\"y\""}` || rows[1][7] != "2026-11-29T12:00:00Z" {
		t.Fatalf("rows %q, %v", rows, err)
	}
}
