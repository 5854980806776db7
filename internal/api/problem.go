package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// FieldError names one offending field of a request and the rule it broke.
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Status   int          `json:"status"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"`
	Errors   []FieldError `json:"errors,omitempty"`
	// FixHint tells the caller what to change for the request to succeed (e.g. the policy to
	// grant a read-only cloud account).
	FixHint string `json:"fixHint,omitempty"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

func problem(status int, detail string, fields ...FieldError) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Errors: fields}
}

func badRequest(detail string, fields ...FieldError) *Problem {
	return problem(http.StatusBadRequest, detail, fields...)
}

func notFound(what string) *Problem { return problem(http.StatusNotFound, what+" not found") }

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

const maxBody = 1 << 20

// decode reads a JSON body into v, turning every way a body can be wrong into a 400 that
// says where: bad syntax (with the offset), a wrong type (with the field), unknown fields.
func decode(r *http.Request, v any) *Problem {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return badRequest("the request body is empty")
		case errors.As(err, &syn):
			return badRequest(fmt.Sprintf("malformed JSON at byte %d", syn.Offset))
		case errors.As(err, &typ):
			field := typ.Field
			if field == "" {
				field = "(body)"
			}
			return badRequest("a field has the wrong type", FieldError{Field: field, Rule: "type",
				Message: fmt.Sprintf("must be %s, not %s", typ.Type, typ.Value)})
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest("unknown field", FieldError{Field: name, Rule: "unknown", Message: "is not a field of this request"})
		default:
			return badRequest("malformed JSON: " + err.Error())
		}
	}
	if dec.More() {
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}
