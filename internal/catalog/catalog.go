// Package catalog is the catalog of types: for each (category, type) pair it holds the settings a
// provisioner accepts (a JSON Schema) and the outputs it may report. Job configs and provisioner
// protocol calls are validated against it, so every error names the field and the rule it broke.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/groundworkhq/groundwork/internal/store"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// Category is the kind of thing a type describes; the protocol's API calls it "kind". The
// store keeps pairs of provisioner registrations, so the type is declared there.
type Category = store.CatalogCategory

const (
	CategoryTarget           = store.CategoryTarget
	CategoryTool             = store.CategoryTool
	CategoryDeployment       = store.CategoryDeployment
	CategoryManagedResource  = store.CategoryManagedResource
	CategoryConsumedResource = store.CategoryConsumedResource
)

// Categories lists the categories a provisioner can handle. An artifact has no provisioner, so
// it is not one of them.
var Categories = store.CatalogCategories

// Pair names one (category, type): the unit a provisioner registers for. Its String spells
// it "category/type"; Validate checks the category is known and the type a plausible name.
type Pair = store.CatalogPair

// ParsePair reads "category/type".
func ParsePair(s string) (Pair, error) {
	cat, typ, ok := strings.Cut(s, "/")
	if !ok {
		return Pair{}, fmt.Errorf("pair %q: want category/type", s)
	}
	p := Pair{Kind: Category(cat), Type: typ}
	if err := p.Validate(); err != nil {
		return Pair{}, fmt.Errorf("pair %q: %w", s, err)
	}
	return p, nil
}

// Output is one value a provisioner may report once its work is done.
type Output struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // a JSON Schema type name: string, integer, boolean, array, object
	Description string `json:"description,omitempty"`
	// Secret outputs are references to a secret store, never the secret itself.
	Secret bool `json:"secret,omitempty"`
}

// Type is one catalog entry.
type Type struct {
	Pair
	Title       string          `json:"title"`
	Description string          `json:"description,omitempty"`
	Settings    json.RawMessage `json:"settings"` // a JSON Schema (draft 2020-12)
	Outputs     []Output        `json:"outputs"`
	// Check adds rules JSON Schema cannot say (min <= max). It sees the config with defaults
	// applied and returns field errors.
	Check func(config map[string]any) []FieldError `json:"-"`
}

// FieldError names one field of a config (a path such as "nodeGroups[0].min"; "" is the
// whole config) and the rule it broke (the JSON Schema keyword: required, type, minimum,
// enum, pattern, ...).
type FieldError = validation.FieldError

// ValidationError is a config refused by the catalog.
type ValidationError struct {
	Pair   Pair
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		name := f.Field
		if name == "" {
			name = "(config)"
		}
		parts[i] = fmt.Sprintf("%s: %s (%s)", name, f.Message, f.Rule)
	}
	return fmt.Sprintf("invalid settings for %s: %s", e.Pair, strings.Join(parts, "; "))
}

// ErrUnknownType is returned for a pair the catalog does not hold.
var ErrUnknownType = errors.New("unknown type")

type entry struct {
	typ    Type
	schema *jsonschema.Schema
	doc    any // the schema as decoded JSON, walked to apply defaults
}

// Catalog holds the types. It is safe for concurrent use; types may be added at run time (a
// remote provisioner's type) but never replaced.
type Catalog struct {
	mu    sync.RWMutex
	types map[Pair]*entry
	order []Pair
}

// New returns a catalog holding types; each schema is compiled now, so a broken schema is found
// at start-up, not at the first job.
func New(types ...Type) (*Catalog, error) {
	c := &Catalog{types: map[Pair]*entry{}}
	for _, t := range types {
		if err := c.Add(t); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Add compiles t's schema and adds it. A pair already in the catalog is refused.
func (c *Catalog) Add(t Type) error {
	if err := t.Pair.Validate(); err != nil {
		return err
	}
	e, err := compile(t)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.types[t.Pair]; dup {
		return fmt.Errorf("catalog: type %s already present", t.Pair)
	}
	c.types[t.Pair] = e
	c.order = append(c.order, t.Pair)
	return nil
}

func compile(t Type) (*entry, error) {
	if len(t.Settings) == 0 {
		t.Settings = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.Settings))
	if err != nil {
		return nil, fmt.Errorf("catalog: %s settings schema: %w", t.Pair, err)
	}
	url := "groundwork:catalog/" + t.Pair.String() + ".json"
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	if err := comp.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("catalog: %s settings schema: %w", t.Pair, err)
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("catalog: %s settings schema: %w", t.Pair, err)
	}
	return &entry{typ: t, schema: sch, doc: doc}, nil
}

// Types lists the catalog's types in the order they were added.
func (c *Catalog) Types() []Type {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Type, len(c.order))
	for i, p := range c.order {
		out[i] = c.types[p].typ
	}
	return out
}

// Get returns the type for p.
func (c *Catalog) Get(p Pair) (Type, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.types[p]
	if !ok {
		return Type{}, false
	}
	return e.typ, true
}

// Validate checks config against p's settings schema and returns the config with the schema's
// defaults filled in. A refused config yields a *ValidationError listing every broken field; an
// unknown pair yields an error wrapping ErrUnknownType.
func (c *Catalog) Validate(p Pair, config json.RawMessage) (json.RawMessage, error) {
	c.mu.RLock()
	e, ok := c.types[p]
	c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, ErrUnknownType)
	}
	if len(bytes.TrimSpace(config)) == 0 || string(bytes.TrimSpace(config)) == "null" {
		config = json.RawMessage(`{}`)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(config))
	if err != nil {
		return nil, &ValidationError{Pair: p, Fields: []FieldError{{Rule: "json", Message: "config is not valid JSON: " + err.Error()}}}
	}
	inst = applyDefaults(e.doc, inst)
	var fields []FieldError
	if err := e.schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, fmt.Errorf("validate %s: %w", p, err)
		}
		fields = fieldErrors(ve, inst)
	}
	if unknown := unknownKeys(e.doc, inst, inst, nil); len(unknown) > 0 {
		fields = append(fields, unknown...)
		slices.SortStableFunc(fields, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
	}
	if len(fields) == 0 && e.typ.Check != nil {
		if m, ok := inst.(map[string]any); ok {
			fields = e.typ.Check(m)
		}
	}
	if len(fields) > 0 {
		return nil, &ValidationError{Pair: p, Fields: fields}
	}
	out, err := json.Marshal(inst)
	if err != nil {
		return nil, fmt.Errorf("encode %s config: %w", p, err)
	}
	return out, nil
}
