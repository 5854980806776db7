package azurefake

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
)

// ListPageSize is how many resources a page of a list operation holds: small, so that a
// handful of resources takes several pages and a caller that stops after the first page
// misses some.
//
// The modules' fakes keep a listing's remaining pages per request path, so two listings of
// the same collection at once on one Cloud share their pages; tests list one at a time.
const ListPageSize = 2

// ofType is every resource of typ in the subscription (type compared without case), as T,
// sorted by id.
func ofType[T any](c *Cloud, typ string) []T {
	c.mu.Lock()
	keys := make([]string, 0, len(c.objs))
	for k, raw := range c.objs {
		var probe struct{ Type string }
		if json.Unmarshal(raw, &probe) == nil && strings.EqualFold(probe.Type, typ) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		var v T
		if json.Unmarshal(c.objs[k], &v) == nil {
			out = append(out, v)
		}
	}
	c.mu.Unlock()
	return out
}

// paged answers a list operation with items, ListPageSize to a page, each page made by page;
// an empty list is one empty page. The fake server links each page to the next.
func paged[T, P any](items []T, page func([]T) P) (resp azfake.PagerResponder[P]) {
	for i := 0; i == 0 || i < len(items); i += ListPageSize {
		resp.AddPage(http.StatusOK, page(items[i:min(i+ListPageSize, len(items))]), nil)
	}
	return resp
}
