// Package pricing holds the price book (public list prices per cloud, region and SKU, each
// with its source and date), the monthly estimate of a job's resources against it, and the
// parsers that rebuild the book from the clouds' public price lists.
package pricing

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
)

//go:embed book.json
var embedded []byte

// Entry is one price: per Unit of SKU in Region of Cloud.
type Entry struct {
	Cloud  string  `json:"cloud"`
	Region string  `json:"region"`
	SKU    string  `json:"sku"`
	Unit   string  `json:"unit"`
	Price  float64 `json:"price"`
	Source string  `json:"source"`
	Date   string  `json:"date"`
}

// Book is a price book.
type Book struct {
	Date     string  `json:"date"`
	Currency string  `json:"currency"`
	Entries  []Entry `json:"entries"`

	index map[string]Entry
}

// Embedded returns the price book built into this binary.
func Embedded() (*Book, error) { return Parse(embedded) }

// Parse reads a book written by Write (or embedded).
func Parse(raw []byte) (*Book, error) {
	var b Book
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("price book: %w", err)
	}
	if b.Currency == "" || b.Date == "" {
		return nil, fmt.Errorf("price book: currency and date are required")
	}
	b.reindex()
	return &b, nil
}

func key(cloud, region, sku string) string { return cloud + "|" + region + "|" + sku }

func (b *Book) reindex() {
	b.index = make(map[string]Entry, len(b.Entries))
	for _, e := range b.Entries {
		b.index[key(e.Cloud, e.Region, e.SKU)] = e
	}
}

// Lookup returns the price of sku in cloud's region.
func (b *Book) Lookup(cloud, region, sku string) (Entry, bool) {
	e, ok := b.index[key(cloud, region, sku)]
	return e, ok
}

// Merge returns b with entries added or replacing b's of the same cloud, region and SKU; the
// book's date becomes date.
func (b *Book) Merge(entries []Entry, date string) *Book {
	out := &Book{Date: date, Currency: b.Currency}
	m := map[string]Entry{}
	for _, e := range b.Entries {
		m[key(e.Cloud, e.Region, e.SKU)] = e
	}
	for _, e := range entries {
		m[key(e.Cloud, e.Region, e.SKU)] = e
	}
	for _, e := range m {
		out.Entries = append(out.Entries, e)
	}
	sort.Slice(out.Entries, func(i, j int) bool {
		a, c := out.Entries[i], out.Entries[j]
		return key(a.Cloud, a.Region, a.SKU) < key(c.Cloud, c.Region, c.SKU)
	})
	out.reindex()
	return out
}

// JSON is the book as Parse reads it.
func (b *Book) JSON() ([]byte, error) {
	raw, err := json.MarshalIndent(b, "", " ")
	if err != nil {
		return nil, err
	}
	return append(raw, '\n'), nil
}
