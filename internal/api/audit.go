package api

import (
	"errors"
	"net/http"

	"github.com/groundworkhq/groundwork/internal/audit"
)

// maxExport bounds one export so that a request cannot hold the store for ever; narrow the
// time range to export more.
const maxExport = 100_000

// AuditPage is the JSON answer of GET /audit-logs.
type AuditPage struct {
	Data  []*audit.Entry `json:"data"`
	Page  int            `json:"page"`
	Limit int            `json:"limit"`
	Total int            `json:"total"`
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, p *Principal) error {
	q := r.URL.Query()
	f, err := audit.ParseFilter(p.OrgID, q.Get)
	var fe *audit.FieldError
	if errors.As(err, &fe) {
		return badRequest("bad audit filter", *fe)
	}
	if err != nil {
		return err
	}
	format := q.Get("format")
	if format == "" {
		if r.Header.Get("Accept") == "application/x-ndjson" {
			format = "ndjson"
		} else if r.Header.Get("Accept") == "text/csv" {
			format = "csv"
		}
	}
	switch format {
	case "", "json":
		entries, total, err := s.cfg.Store.ListAudit(r.Context(), f)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, AuditPage{Data: entries, Page: f.Page, Limit: f.Limit, Total: total})
		return nil
	case "csv", "ndjson":
		return s.exportAudit(w, r, f, format)
	}
	return badRequest("bad format", FieldError{Field: "format", Rule: "enum", Message: "must be json, csv or ndjson"})
}

// exportAudit writes every matching entry (not one page), newest first, reading in pages of
// the maximum size. page and limit of the query are ignored.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request, f *audit.Filter, format string) error {
	f.Limit = audit.MaxLimit
	var all []*audit.Entry
	for f.Page = 1; len(all) < maxExport; f.Page++ {
		entries, _, err := s.cfg.Store.ListAudit(r.Context(), f)
		if err != nil {
			return err
		}
		all = append(all, entries...)
		if len(entries) < f.Limit {
			break
		}
	}
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="audit-logs.csv"`)
		w.WriteHeader(http.StatusOK)
		return audit.WriteCSV(w, all)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	return audit.WriteNDJSON(w, all)
}
