package components

import (
	"encoding/json"
	"net/http"
)

// ListHandler serves GET /api/catalog/components as the reference answers it:
// {"data": [{id, name, category, version, description, defaultValues}, ...]}.
func (c *Catalog) ListHandler() http.HandlerFunc {
	body, err := json.Marshal(struct {
		Data []Summary `json:"data"`
	}{c.List()})
	return func(w http.ResponseWriter, _ *http.Request) {
		if err != nil {
			// The catalog is checked at load; a value that does not encode is a bug.
			http.Error(w, "catalog not encodable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}
