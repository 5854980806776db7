package pricing

import (
	"context"
	"fmt"
	"math"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/plan"
)

// HoursPerMonth is the month an hourly price is multiplied by.
const HoursPerMonth = 730

// Usage is one thing a job will pay for: Quantity of SKU. An hourly SKU is charged for every
// hour of the month.
type Usage struct {
	Item     string
	SKU      string
	Quantity float64
	Note     string
	// Unpriced marks a cost that exists but that the request does not size (a root volume
	// whose size the image decides): the line is unknown whatever the book says.
	Unpriced string
}

// UsageSource says what a job of one provider will pay for.
type UsageSource interface {
	Usage(j *job.Job) ([]Usage, []string, error)
}

// Coster estimates jobs against a book (plan.Coster).
type Coster struct {
	Book *Book
	// Sources by provider; a provider without one (local, a cluster space) costs nothing in
	// any cloud, which its one line says.
	Sources map[string]UsageSource
}

var baseAssumptions = []string{
	fmt.Sprintf("%d hours per month", HoursPerMonth),
	"on-demand list prices, before tax, discounts and free tiers",
	"traffic not included (data transfer, NAT and load balancer data processing, LCUs)",
}

// Estimate implements plan.Coster.
func (c Coster) Estimate(_ context.Context, j *job.Job, region string) (plan.Estimate, error) {
	out := plan.Estimate{Currency: c.Book.Currency, PriceBookDate: c.Book.Date, Lines: []plan.Line{}, Complete: true}
	src, ok := c.Sources[j.Provider]
	if !ok {
		zero := 0.0
		note := "local: no cloud cost"
		if j.Provider != "local" {
			note = j.Provider + ": no cloud cost through Groundwork"
		}
		out.Lines = append(out.Lines, plan.Line{Item: string(j.Family), Quantity: 1, Unit: "month", UnitPrice: &zero, Monthly: &zero, Known: true, Note: note})
		out.Assumptions = []string{"runs on " + j.Provider + " resources Groundwork does not bill"}
		return out, nil
	}
	usage, assumptions, err := src.Usage(j)
	if err != nil {
		return out, err
	}
	out.Assumptions = append(append([]string{}, baseAssumptions...), assumptions...)
	total := 0.0
	for _, u := range usage {
		l := plan.Line{Item: u.Item, Quantity: u.Quantity, Note: u.Note}
		e, found := c.Book.Lookup(j.Provider, region, u.SKU)
		switch {
		case u.Unpriced != "":
			l.Unit, l.Note = "", u.Unpriced
		case !found:
			l.Note = fmt.Sprintf("unknown: the price book has no price for %s in %s", u.SKU, region)
		default:
			price, monthly := e.Price, u.Quantity*e.Price
			if e.Unit == "hour" {
				monthly *= HoursPerMonth
			}
			monthly = cents(monthly)
			l.Unit, l.UnitPrice, l.Monthly, l.Known = e.Unit, &price, &monthly, true
			total += monthly
		}
		if !l.Known {
			out.Complete = false
		}
		out.Lines = append(out.Lines, l)
	}
	out.Total = cents(total)
	return out, nil
}

// cents rounds to the cent, half away from zero, after dropping the float error of the
// multiplication (0.0225 × 730 is 16.424999… in binary, 16.425 on the price list).
func cents(x float64) float64 {
	return math.Round(math.Round(x*1e6)/1e4) / 100
}
