package gcpfake

import (
	"net/http"
	"strconv"
)

// PageSize is how many items a list answers per page unless the request asks for fewer
// (maxResults, pageSize): small, so that every client's paging is exercised.
const PageSize = 2

// Page is the page of items the request's pageToken names, and the token of the next page
// ("" on the last). Tokens are offsets; Google's are opaque, and clients treat them so.
func Page[T any](r *http.Request, items []T) ([]T, string) {
	size := PageSize
	for _, q := range []string{"maxResults", "pageSize"} {
		if n, err := strconv.Atoi(r.URL.Query().Get(q)); err == nil && n > 0 && n < size {
			size = n
		}
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
	if from < 0 || from > len(items) {
		from = len(items)
	}
	to := min(from+size, len(items))
	page := items[from:to]
	if page == nil {
		page = []T{}
	}
	if to < len(items) {
		return page, strconv.Itoa(to)
	}
	return page, ""
}
