package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Approvals of config updates that drop data (docs/updates.md): such an update or rollback
// is recorded as a revision awaiting approval, which another principal holding
// provisioning:approve approves or rejects.

// updated is the answer of an update or a rollback: the job, and the revision awaiting
// approval when the change drops data (then the job is as it was, not queued).
type updated struct {
	job.Job
	PendingRevision int `json:"pendingRevision,omitempty"`
}

// printPending prints an update that awaits approval: the job as it is, then which revision
// awaits whose approval and how to give it.
func (g *globals) printPending(cmd *cobra.Command, u *updated) error {
	w := cmd.OutOrStdout()
	if g.output != "table" {
		return g.printOut(w, u, nil, nil)
	}
	if err := g.printJob(w, &u.Job); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "revision %d drops data and awaits approval: another principal with provisioning:approve runs `groundwork jobs approve %s %d` (or `jobs reject`); the job is left as it is until then\n",
		u.PendingRevision, u.ID, u.PendingRevision)
	return err
}

// newApprovalCommands are `jobs approve` and `jobs reject`.
func newApprovalCommands(g *globals) []*cobra.Command {
	decide := func(verb, short string) *cobra.Command {
		var reason string
		cmd := &cobra.Command{
			Use: verb + " JOB_ID REVISION [--reason R]", Short: short, Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				n, err := strconv.Atoi(args[1])
				if err != nil || n < 1 {
					return fmt.Errorf("REVISION %q: must be a revision number (groundwork jobs revisions %s lists them)", args[1], args[0])
				}
				body := map[string]any{}
				if reason != "" {
					body["reason"] = reason
				}
				path := jobPath(args[0]) + "/revisions/" + strconv.Itoa(n) + "/" + verb
				if verb == "reject" {
					var rev store.JobRevision
					if err := g.client().Do(ctxOf(cmd), "POST", path, body, &rev); err != nil {
						return err
					}
					if g.output != "table" {
						return g.printOut(cmd.OutOrStdout(), rev, nil, nil)
					}
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "revision %d of %s rejected: nothing runs, the job keeps its config\n", rev.Number, rev.JobID)
					return err
				}
				var j job.Job
				if err := g.client().Do(ctxOf(cmd), "POST", path, body, &j); err != nil {
					return err
				}
				return g.printOrWatch(cmd, &j)
			},
		}
		cmd.Flags().StringVar(&reason, "reason", "", "why (at most 1000 characters; kept in the audit log)")
		return cmd
	}
	approve := decide("approve", "Approve a config update awaiting approval (it drops data): the job carries it out")
	approve.Flags().Bool("watch", false, "follow the job until it settles again")
	reject := decide("reject", "Reject a config update awaiting approval: nothing runs")
	return []*cobra.Command{approve, reject}
}
