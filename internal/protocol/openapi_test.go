package protocol_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/groundworkhq/groundwork/internal/catalog"
	"github.com/groundworkhq/groundwork/internal/protocol"
)

// jsonFields lists the JSON names of t's fields, descending into embedded structs.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TestOpenAPIMatchesTypes keeps api/provisioner-openapi.json true: every shape it documents
// has exactly the fields the Go types put on the wire.
func TestOpenAPIMatchesTypes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../api/provisioner-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi document: %v", err)
	}
	cases := map[string]any{
		"Pair": catalog.Pair{}, "Request": protocol.Request{}, "Change": protocol.Change{},
		"Resource": protocol.Resource{}, "Drift": protocol.Drift{}, "FieldError": catalog.FieldError{},
		"PlanAnswer": protocol.PlanAnswer{}, "ApplyAnswer": protocol.ApplyAnswer{},
		"InspectAnswer": protocol.InspectAnswer{}, "Operation": protocol.Operation{},
		"Health": protocol.Health{}, "Problem": protocol.Problem{},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Fatalf("schema %s missing", name)
			}
			var documented []string
			for k := range s.Properties {
				documented = append(documented, k)
			}
			slices.Sort(documented)
			if want := jsonFields(reflect.TypeOf(v)); !slices.Equal(documented, want) {
				t.Fatalf("schema %s documents %v, the type has %v", name, documented, want)
			}
		})
	}
}
