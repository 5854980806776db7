package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/groundworkhq/groundwork/internal/validation"
)

// FieldError names one offending field of a request and the rule it broke: the one
// validation shape every layer returns.
type FieldError = validation.FieldError

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
	// RequestID names the request in the server's log.
	RequestID string `json:"requestId,omitempty"`
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
	p.RequestID = requestID(r.Context())
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
// decodeOptional is decode for a body that may be left out (empty or blank): v keeps its zero
// value then.
func decodeOptional(r *http.Request, v any) *Problem {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return badRequest("unreadable body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decode(r, v)
}

func decode(r *http.Request, v any) *Problem {
	body := bufio.NewReader(io.LimitReader(r.Body, maxBody))
	// A bare null decodes into any Go value without error and leaves it untouched, so a PATCH
	// of null would answer 200 for a body the schema forbids. Every body here is an object.
	if isNull(body) {
		return badRequest("the request body must be a JSON object, not null",
			FieldError{Field: "(body)", Rule: "type", Message: "must be an object, not null"})
	}
	dec := json.NewDecoder(body)
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

// isNull reports whether the body's first JSON value is the literal null, without consuming
// anything the decoder needs.
func isNull(b *bufio.Reader) bool {
	for {
		c, err := b.ReadByte()
		if err != nil {
			return false
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		_ = b.UnreadByte()
		peek, _ := b.Peek(5)
		if len(peek) < 4 || string(peek[:4]) != "null" {
			return false
		}
		return len(peek) == 4 || strings.ContainsRune(" \t\r\n", rune(peek[4]))
	}
}
