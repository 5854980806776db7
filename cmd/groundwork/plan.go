package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/plan"
)

func newPlan(g *globals) *cobra.Command {
	var spec specFlags
	cmd := &cobra.Command{
		Use:   "plan -f spec.yaml [--space SPACE_ID]",
		Short: "Show what a spec would do, creating nothing: steps, resources, cloud operations, IAM policy, monthly cost",
		Long: "Plan a job from the spec 'jobs create' takes, without creating it: each step with the resources\n" +
			"it creates or adopts and the cloud operations it calls, the least-privilege policy that grants\n" +
			"exactly those, and the estimated monthly cost. -o json shows the policy document.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := spec.body(cmd)
			if err != nil {
				return err
			}
			var p plan.Plan
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/provisioning-jobs/plan", body, &p); err != nil {
				return err
			}
			if g.structured() {
				return g.printOut(cmd.OutOrStdout(), p, nil, nil)
			}
			return printPlan(cmd.OutOrStdout(), &p)
		},
	}
	spec.register(cmd)
	return cmd
}

// printPlan writes a plan as tables: the steps, then the cost lines and total.
func printPlan(w io.Writer, p *plan.Plan) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tRESOURCES\tOPERATIONS")
	for _, s := range p.Steps {
		var res []string
		for _, r := range s.Resources {
			n := r.Action + " " + r.Type
			if r.Count > 1 {
				n += fmt.Sprintf(" ×%d", r.Count)
			}
			res = append(res, n+" "+r.Name)
		}
		ops := "-"
		if len(s.Operations) > 0 {
			ops = strings.Join(s.Operations, ", ")
		}
		r := "-"
		if len(res) > 0 {
			r = strings.Join(res, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, r, ops)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npolicy: %s (%d operations; -o json shows the document)\n", p.Policy.Format, len(p.Operations()))
	c := p.Cost
	if c.Currency == "" {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tQUANTITY\tUNIT\tUNIT PRICE\tMONTHLY\tNOTE")
	for _, l := range c.Lines {
		price, monthly := "unknown", "unknown"
		if l.Known && l.UnitPrice != nil && l.Monthly != nil {
			price, monthly = fmt.Sprintf("%.4f", *l.UnitPrice), fmt.Sprintf("%.2f", *l.Monthly)
		}
		fmt.Fprintf(tw, "%s\t%g\t%s\t%s\t%s\t%s\n", l.Item, l.Quantity, l.Unit, price, monthly, l.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := fmt.Sprintf("%.2f %s/month", c.Total, c.Currency)
	if !c.Complete {
		total += " (some prices unknown: not included)"
	}
	fmt.Fprintf(w, "\ntotal: %s\nassumptions: %s\nprice book: %s\n", total, strings.Join(c.Assumptions, "; "), c.PriceBookDate)
	return nil
}
