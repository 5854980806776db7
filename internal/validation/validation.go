// Package validation holds the one shape a refused input takes in every layer: a list of
// fields, each with the rule it broke and a message for a person. Pipelines, services and
// the API return it; the API renders it as the errors of a 400 problem.
package validation

import (
	"errors"
	"net/mail"
	"strings"
)

// FieldError names one offending field and the rule it broke.
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
}

// Error implements error: a single refused field may be returned as *FieldError.
func (f *FieldError) Error() string { return f.Field + ": " + f.Message }

// FieldErrors implements Fielder.
func (f *FieldError) FieldErrors() []FieldError { return []FieldError{*f} }

// Error is a refused input: every field that is wrong.
type Error []FieldError

// New is an Error of one field.
func New(field, rule, message string) Error {
	return Error{{Field: field, Rule: rule, Message: message}}
}

func (e Error) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Field + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}

// FieldErrors implements Fielder.
func (e Error) FieldErrors() []FieldError { return e }

// Fielder is implemented by an error that knows which fields are wrong. Error is the one to
// return; the interface lets an error type of its own (a test's, say) be rendered the same.
type Fielder interface {
	FieldErrors() []FieldError
}

// Fields returns the fields err names, if it (or an error it wraps) names any.
func Fields(err error) ([]FieldError, bool) {
	var f Fielder
	if errors.As(err, &f) {
		return f.FieldErrors(), true
	}
	return nil, false
}

// Email reports whether s is a bare email address (no display name), as users and tokens
// are keyed by: lower-cased by the caller, at most 254 characters.
func Email(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && len(s) <= 254
}
