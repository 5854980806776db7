package catalog

import (
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// fieldErrors flattens the validator's error tree into one entry per broken rule. Only leaves
// carry a rule; inner nodes ("doesn't validate against schema") only group them.
func fieldErrors(ve *jsonschema.ValidationError, inst any) []FieldError {
	p := message.NewPrinter(language.English)
	var out []FieldError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		base := fieldPath(e.InstanceLocation, inst)
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range req.Missing {
				out = append(out, FieldError{Field: join(base, m), Rule: "required", Message: "is required"})
			}
			return
		}
		kw := e.ErrorKind.KeywordPath()
		rule := "schema"
		if len(kw) > 0 {
			rule = kw[0]
		}
		out = append(out, FieldError{Field: base, Rule: rule, Message: e.ErrorKind.LocalizedString(p)})
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// fieldPath spells an instance location the way a user reads a config: object keys joined by
// dots, array indexes in brackets ("nodeGroups[0].min"). Whether a token is an index is decided
// by the instance itself, since a key may look like a number.
func fieldPath(loc []string, inst any) string {
	var b strings.Builder
	cur := inst
	for _, tok := range loc {
		switch v := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
				cur = v[i]
			} else {
				cur = nil
			}
		case map[string]any:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
			cur = v[tok]
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
			cur = nil
		}
	}
	return b.String()
}

func join(base, name string) string {
	if base == "" {
		return name
	}
	return base + "." + name
}

// applyDefaults fills in, for every object the schema describes, the properties that have a
// "default" and are absent from the instance. It recurses through properties and array items,
// so a node group's defaults apply to each node group. The instance is modified in place.
func applyDefaults(schema any, inst any) any {
	s, ok := schema.(map[string]any)
	if !ok {
		return inst
	}
	switch v := inst.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, ps := range props {
			psm, _ := ps.(map[string]any)
			if cur, present := v[name]; present {
				v[name] = applyDefaults(psm, cur)
				continue
			}
			if def, has := psm["default"]; has {
				v[name] = applyDefaults(psm, deepCopy(def))
			}
		}
		return v
	case []any:
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return v
		}
		for i := range v {
			v[i] = applyDefaults(items, v[i])
		}
		return v
	default:
		return inst
	}
}

// deepCopy keeps a default shared by the schema from being aliased into (and later mutated
// through) one config.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	default:
		return v
	}
}
