package catalog

import (
	"fmt"
	"slices"
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

// unknownKeys reports the keys of inst that its schema does not declare, in every object whose
// schema lists properties and says nothing of others: a misspelt setting ("nmae") would
// otherwise be accepted and silently ignored. A schema allows extras by saying so
// (additionalProperties, patternProperties or unevaluatedProperties), or by declaring no
// properties at all (a free-form object such as a chart's values); one that composes
// subschemas (allOf, anyOf, oneOf, $ref, if) is left to them.
func unknownKeys(schema, inst, top any, loc []string) []FieldError {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	switch v := inst.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return nil
		}
		open := false
		for _, kw := range []string{"additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "$ref", "if"} {
			if _, has := s[kw]; has {
				open = true
			}
		}
		var out []FieldError
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := append(slices.Clone(loc), k)
			ps, declared := props[k]
			if !declared {
				if !open {
					out = append(out, FieldError{Field: fieldPath(path, top), Rule: "additionalProperties",
						Message: unknownMessage(k, props)})
				}
				continue
			}
			out = append(out, unknownKeys(ps, v[k], top, path)...)
		}
		return out
	case []any:
		var out []FieldError
		for i, item := range v {
			out = append(out, unknownKeys(s["items"], item, top, append(slices.Clone(loc), strconv.Itoa(i)))...)
		}
		return out
	}
	return nil
}

// unknownMessage names the settings the object has, and the nearest to the key when it looks
// like a typo of one.
func unknownMessage(key string, props map[string]any) string {
	names := make([]string, 0, len(props))
	best, bestDist := "", 3 // suggest only within two edits
	for n := range props {
		names = append(names, n)
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestDist {
			best, bestDist = n, d
		}
	}
	sort.Strings(names)
	msg := "is not a setting of this type"
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg + "; known: " + strings.Join(names, ", ")
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
