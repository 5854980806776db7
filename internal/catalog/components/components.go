// Package components is the curated Helm component catalog (configs/components.yaml): it
// loads the catalog, lists it, turns a user's values (nested, or dotted keys such as
// "controller.service.type") into the values a release gets, and validates them against the
// component's schema, naming each field that is wrong.
package components

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"sigs.k8s.io/yaml"

	"github.com/groundworkhq/groundwork/configs"

	"github.com/groundworkhq/groundwork/internal/validation"
)

// Chart says where a component's chart comes from: an HTTP repository (RepoURL and Name) or an
// OCI reference, at a pinned version.
type Chart struct {
	RepoURL string `json:"repoURL,omitempty"`
	Name    string `json:"name,omitempty"`
	OCI     string `json:"oci,omitempty"`
	Version string `json:"version"`
}

// Component is one catalog entry.
type Component struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Category    string         `json:"category"`
	Version     string         `json:"version"`
	Description string         `json:"description"`
	Chart       Chart          `json:"chart"`
	Namespace   string         `json:"namespace"`
	ReleaseName string         `json:"releaseName"`
	Defaults    map[string]any `json:"defaults,omitempty"`
	Schema      map[string]any `json:"schema,omitempty"`

	compiled *jsonschema.Schema
}

// Summary is a component as GET /api/catalog/components lists it (the reference's fields plus
// the default values the listing promises).
type Summary struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	Category      string         `json:"category"`
	Version       string         `json:"version"`
	Description   string         `json:"description"`
	DefaultValues map[string]any `json:"defaultValues,omitempty"`
}

// Catalog is the loaded, read-only catalog.
type Catalog struct {
	byID  map[string]*Component
	order []string
}

// Default loads the catalog embedded in the binary.
func Default() (*Catalog, error) { return Parse(configs.ComponentsYAML) }

// Load reads a catalog file (an operator's own catalog in place of the embedded one).
func Load(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read component catalog: %w", err)
	}
	return Parse(b)
}

// Parse parses and checks a catalog document: ids unique, charts complete, schemas compile
// and every component's defaults satisfy its own schema.
func Parse(doc []byte) (*Catalog, error) {
	var file struct {
		Components []*Component `json:"components"`
	}
	if err := yaml.UnmarshalStrict(doc, &file); err != nil {
		return nil, fmt.Errorf("parse component catalog: %w", err)
	}
	c := &Catalog{byID: map[string]*Component{}}
	for i, comp := range file.Components {
		if err := comp.check(); err != nil {
			return nil, fmt.Errorf("component catalog: components[%d] (%s): %w", i, comp.ID, err)
		}
		if _, dup := c.byID[comp.ID]; dup {
			return nil, fmt.Errorf("component catalog: id %q appears twice", comp.ID)
		}
		c.byID[comp.ID] = comp
		c.order = append(c.order, comp.ID)
	}
	return c, nil
}

func (comp *Component) check() error {
	switch {
	case comp.ID == "":
		return errors.New("id is empty")
	case comp.Name == "" || comp.Category == "" || comp.Description == "":
		return errors.New("name, category and description are required")
	case comp.Chart.Version == "":
		return errors.New("chart.version is required")
	case (comp.Chart.RepoURL == "") == (comp.Chart.OCI == ""):
		return errors.New("chart needs exactly one of repoURL or oci")
	case comp.Chart.RepoURL != "" && comp.Chart.Name == "":
		return errors.New("chart.name is required with chart.repoURL")
	case comp.Chart.OCI != "" && !strings.HasPrefix(comp.Chart.OCI, "oci://"):
		return errors.New("chart.oci must start with oci://")
	case comp.Namespace == "" || comp.ReleaseName == "":
		return errors.New("namespace and releaseName are required")
	}
	if comp.Version == "" {
		comp.Version = comp.Chart.Version
	}
	if comp.Schema == nil {
		comp.Schema = map[string]any{"type": "object"}
	}
	sch, err := compileSchema(comp.ID, comp.Schema)
	if err != nil {
		return err
	}
	comp.compiled = sch
	if err := comp.validate(comp.Defaults); err != nil {
		return fmt.Errorf("defaults do not satisfy the schema: %w", err)
	}
	return nil
}

func compileSchema(id string, schema map[string]any) (*jsonschema.Schema, error) {
	doc, err := toJSONValue(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	url := "mem://components/" + id + ".json"
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	if err := comp.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return sch, nil
}

// toJSONValue round-trips v through JSON into the value model the validator expects
// (json.Number for numbers, so integers stay integers).
func toJSONValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// List returns the components in catalog order.
func (c *Catalog) List() []Summary {
	out := make([]Summary, 0, len(c.order))
	for _, id := range c.order {
		comp := c.byID[id]
		out = append(out, Summary{
			ID: comp.ID, Name: comp.Name, Category: comp.Category, Version: comp.Version,
			Description: comp.Description, DefaultValues: comp.Defaults,
		})
	}
	return out
}

// Get returns the component with id.
func (c *Catalog) Get(id string) (*Component, bool) {
	comp, ok := c.byID[id]
	return comp, ok
}

// IDs lists the component ids in catalog order.
func (c *Catalog) IDs() []string { return slices.Clone(c.order) }

// FieldError is one problem with one value; Field is its dotted path ("controller.service.type").
type FieldError = validation.FieldError

// SecretPaths lists the value paths the component's schema marks "x-secret": true: values that
// are credentials, which Groundwork keeps in its secret store rather than in the job.
func (comp *Component) SecretPaths() [][]string {
	var out [][]string
	var walk func(schema map[string]any, path []string)
	walk = func(schema map[string]any, path []string) {
		props, _ := schema["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub, ok := props[k].(map[string]any)
			if !ok {
				continue
			}
			p := append(slices.Clone(path), k)
			if sub["x-secret"] == true {
				out = append(out, p)
				continue
			}
			walk(sub, p)
		}
	}
	walk(comp.Schema, nil)
	return out
}

// ValuesError lists every problem found in a component's values.
type ValuesError struct {
	Component string
	Errors    []FieldError
}

func (e *ValuesError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		field := fe.Field
		if field == "" {
			field = "(values)"
		}
		parts[i] = field + ": " + fe.Message
	}
	return fmt.Sprintf("invalid values for component %s: %s", e.Component, strings.Join(parts, "; "))
}

// Values turns the user's values into the release's: dotted keys expanded, then merged over
// the component's defaults (maps merge key by key; anything else replaces), then validated
// against the schema. The result is a fresh map; the catalog is not modified.
func (comp *Component) Values(user map[string]any) (map[string]any, error) {
	nested, err := ExpandDotted(user)
	if err != nil {
		var ve *ValuesError
		if errors.As(err, &ve) {
			ve.Component = comp.ID
		}
		return nil, err
	}
	merged := Merge(deepCopy(comp.Defaults), nested)
	if err := comp.validate(merged); err != nil {
		return nil, err
	}
	return merged, nil
}

func (comp *Component) validate(values map[string]any) error {
	if values == nil {
		values = map[string]any{}
	}
	inst, err := toJSONValue(values)
	if err != nil {
		return &ValuesError{Component: comp.ID, Errors: []FieldError{{Message: "not representable as JSON: " + err.Error()}}}
	}
	err = comp.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("validate values of %s: %w", comp.ID, err)
	}
	p := message.NewPrinter(language.English)
	ve := &ValuesError{Component: comp.ID}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			ve.Errors = append(ve.Errors, FieldError{Field: joinPath(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(p)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	sort.SliceStable(ve.Errors, func(i, j int) bool { return ve.Errors[i].Field < ve.Errors[j].Field })
	return ve
}

// joinPath renders a JSON location as a dotted path, escaping dots inside keys the way
// dotted value keys are written.
func joinPath(loc []string) string {
	parts := make([]string, len(loc))
	for i, p := range loc {
		parts[i] = strings.ReplaceAll(p, ".", `\.`)
	}
	return strings.Join(parts, ".")
}

// ExpandDotted turns {"a.b.c": 1, "a": {"d": 2}} into {"a": {"b": {"c": 1}, "d": 2}}. A dot
// that is part of a key is written `\.` (as for annotations:
// "controller.service.annotations.service\.beta\.kubernetes\.io/aws-load-balancer-type").
// Setting the same field twice, or a field inside a value that is not an object, is an error
// naming the key.
func ExpandDotted(in map[string]any) (map[string]any, error) {
	out := map[string]any{}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	// Shorter keys first, so "a" is placed before "a.b" and the conflict names the deeper one.
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) < len(keys[j])
		}
		return keys[i] < keys[j]
	})
	for _, key := range keys {
		path := splitKey(key)
		if slices.Contains(path, "") {
			return nil, &ValuesError{Errors: []FieldError{{Field: key, Message: "empty segment in key"}}}
		}
		v := in[key]
		if m, ok := v.(map[string]any); ok {
			sub, err := ExpandDotted(m)
			if err != nil {
				var ve *ValuesError
				if errors.As(err, &ve) {
					for i := range ve.Errors {
						ve.Errors[i].Field = key + "." + ve.Errors[i].Field
					}
				}
				return nil, err
			}
			v = sub
		}
		if err := setPath(out, path, v); err != nil {
			return nil, &ValuesError{Errors: []FieldError{{Field: key, Message: err.Error()}}}
		}
	}
	return out, nil
}

func splitKey(key string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] == '\\' && i+1 < len(key) && key[i+1] == '.':
			cur.WriteByte('.')
			i++
		case key[i] == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(key[i])
		}
	}
	return append(parts, cur.String())
}

func setPath(m map[string]any, path []string, v any) error {
	for i, p := range path[:len(path)-1] {
		next, exists := m[p]
		if !exists {
			child := map[string]any{}
			m[p] = child
			m = child
			continue
		}
		child, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("%s is already set to a value that is not an object", strings.Join(path[:i+1], "."))
		}
		m = child
	}
	last := path[len(path)-1]
	if old, exists := m[last]; exists {
		om, ok1 := old.(map[string]any)
		nm, ok2 := v.(map[string]any)
		if !ok1 || !ok2 {
			return errors.New("set more than once")
		}
		for k, val := range nm {
			if err := setPath(om, []string{k}, val); err != nil {
				return err
			}
		}
		return nil
	}
	m[last] = v
	return nil
}

// Merge sets override's values over base (maps merge recursively) and returns base.
func Merge(base, override map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, v := range override {
		if om, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = Merge(bm, om)
				continue
			}
			base[k] = Merge(map[string]any{}, om)
			continue
		}
		base[k] = v
	}
	return base
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch t := v.(type) {
		case map[string]any:
			out[k] = deepCopy(t)
		case []any:
			out[k] = slices.Clone(t)
		default:
			out[k] = v
		}
	}
	return out
}
