package apptest

import (
	"encoding/json"
	"slices"
	"testing"
)

// Reply is an API answer as a test reads it: the status and the raw body.
type Reply struct {
	Status int
	Raw    []byte
}

// Decode unmarshals the body into v, failing the test on a body that is not v's JSON.
func (r Reply) Decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Raw, v); err != nil {
		t.Fatalf("decode %s: %v", r.Raw, err)
	}
}

// Fields lists the fields a problem answer names, in its order.
func (r Reply) Fields() []string {
	var pr struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(r.Raw, &pr)
	var out []string
	for _, e := range pr.Errors {
		out = append(out, e.Field)
	}
	return out
}

// Names reports whether the problem answer names field.
func (r Reply) Names(field string) bool { return slices.Contains(r.Fields(), field) }
