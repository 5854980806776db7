package plan

// Estimate is a plan's monthly cost.
type Estimate struct {
	Currency      string   `json:"currency"`
	Lines         []Line   `json:"lines"`
	Total         float64  `json:"total"`
	Assumptions   []string `json:"assumptions"`
	PriceBookDate string   `json:"priceBookDate"`
	// Complete is false when a line's price is unknown: Total then leaves it out.
	Complete bool `json:"complete"`
}

// Line is item × quantity × unit price. A price the book does not hold is Known false with a
// note and no price, never 0.
type Line struct {
	Item      string   `json:"item"`
	Quantity  float64  `json:"quantity"`
	Unit      string   `json:"unit"`
	UnitPrice *float64 `json:"unitPrice"`
	Monthly   *float64 `json:"monthly"`
	Known     bool     `json:"known"`
	Note      string   `json:"note"`
}
