package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/store"
)

// Config updates of live jobs (docs/updates.md) and drift (docs/drift.md): the commands that
// send a job's whole new config, list its revisions, roll it back, inspect it and reconcile it.

// configUpdate are the flags of `jobs update` that send a config update rather than a rename,
// a retag or a VM operation.
type configUpdate struct {
	file             string
	dryRun           bool
	allowDataLoss    bool
	applyImmediately bool
}

func (u *configUpdate) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&u.file, "config", "", "config update: the job's whole new config, YAML or JSON (- for standard input)")
	fl.BoolVar(&u.dryRun, "dry-run", false, "with --config: show what the update would change, per resource, and change nothing")
	fl.BoolVar(&u.allowDataLoss, "allow-data-loss", false, "with --config: accept a change that drops data (a shorter backup retention)")
	fl.BoolVar(&u.applyImmediately, "apply-immediately", true, "with --config: false leaves a disruptive change to the cloud's maintenance window")
}

// run sends the config update of job id: the dry run prints the plan, the update itself is a
// PATCH with the version read just before, so an update made by someone else in between is
// refused (409) rather than overwritten.
func (u *configUpdate) run(g *globals, cmd *cobra.Command, id string, watch bool) error {
	for _, other := range []string{"name", "tag", "promote", "vm-op", "min", "max", "desired"} {
		if cmd.Flags().Changed(other) {
			return fmt.Errorf("--config is an update of its own: send --%s in another one", other)
		}
	}
	config, err := readSpec(u.file)
	if err != nil {
		return err
	}
	if _, ok := config.(map[string]any); !ok {
		return fmt.Errorf("--config %s: the config must be a mapping of settings", u.file)
	}
	body := map[string]any{"config": config, "allowDataLoss": u.allowDataLoss}
	if cmd.Flags().Changed("apply-immediately") {
		body["applyImmediately"] = u.applyImmediately
	}
	if u.dryRun {
		if watch {
			return fmt.Errorf("--dry-run changes nothing: there is nothing to --watch")
		}
		var pl updatePlan
		if err := g.client().Do(ctxOf(cmd), "POST", jobPath(id)+"/update-plan", body, &pl); err != nil {
			return err
		}
		return g.printPlan(cmd.OutOrStdout(), &pl)
	}
	var cur job.Job
	if err := g.client().Do(ctxOf(cmd), "GET", jobPath(id), nil, &cur); err != nil {
		return err
	}
	body["version"] = cur.Version
	var ans updated
	if err := g.client().Do(ctxOf(cmd), "PATCH", jobPath(id), body, &ans); err != nil {
		return err
	}
	if ans.PendingRevision > 0 {
		// Nothing runs until another principal approves it: there is nothing to watch.
		return g.printPending(cmd, &ans)
	}
	j := ans.Job
	if g.output == "table" && j.Version == cur.Version {
		fmt.Fprintln(cmd.OutOrStdout(), "the config changes nothing: no revision recorded")
	}
	if !watch {
		return g.printJob(cmd.OutOrStdout(), &j)
	}
	return g.watch(cmd, j.ID)
}

// updatePlan is the dry run's answer: the plan, and whether applying it needs an approval.
type updatePlan struct {
	pipeline.UpdatePlan
	NeedsApproval bool `json:"needsApproval"`
}

// printPlan prints an update plan: a row per changed field of each resource, with the
// resource's action, disruption and data loss on its first row, then the steps that re-run,
// and whether the update needs an approval.
func (g *globals) printPlan(w io.Writer, pl *updatePlan) error {
	if g.output != "table" {
		return g.printOut(w, pl, nil, nil)
	}
	if !pl.Changed() {
		_, err := fmt.Fprintln(w, "no changes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tACTION\tFIELD\tFROM\tTO\tDISRUPTION\tDATA LOSS")
	for _, r := range pl.Resources {
		loss := "no"
		if r.DataLoss {
			loss = "yes"
		}
		changes := r.Changes
		if len(changes) == 0 {
			changes = []pipeline.FieldChange{{Field: "-"}}
		}
		for i, c := range changes {
			from, to := planValue(c.From), planValue(c.To)
			if c.Field == "-" {
				from, to = "", ""
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Resource, r.Action, c.Field, from, to, r.Disruption, loss)
			} else {
				fmt.Fprintf(tw, "\t\t%s\t%s\t%s\t\t\n", c.Field, from, to)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "re-runs: %s\n", strings.Join(pl.Rerun, ", ")); err != nil {
		return err
	}
	if pl.NeedsApproval {
		_, err := fmt.Fprintln(w, "needs approval: the update drops data; sent with --allow-data-loss it awaits another principal's approval (groundwork jobs approve)")
		return err
	}
	return nil
}

// planValue is a field's value in one cell: JSON, "-" where the field is absent.
func planValue(v any) string {
	if v == nil {
		return "-"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// newConfigCommands are the jobs commands of config revisions and drift.
func newConfigCommands(g *globals) []*cobra.Command {
	revisions := &cobra.Command{
		Use: "revisions JOB_ID", Short: "List a job's config revisions, oldest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var list struct {
				Data []store.JobRevision `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", jobPath(args[0])+"/revisions", nil, &list); err != nil {
				return err
			}
			if g.output == "table" && len(list.Data) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "no revisions: the job's config was never updated")
				return err
			}
			return g.printOut(cmd.OutOrStdout(), list, []string{"REVISION", "STATUS", "REASON", "ACTOR", "CREATED"}, func(add func(...any)) {
				for _, r := range list.Data {
					actor := r.Actor
					if actor == "" {
						actor = "-"
					}
					add(r.Number, r.Status, r.Reason, actor, r.CreatedAt.UTC().Format(time.RFC3339))
				}
			})
		},
	}

	var rollbackDataLoss bool
	rollback := &cobra.Command{
		Use:   "rollback JOB_ID [--allow-data-loss]",
		Short: "Re-open a job whose latest config update failed with its last applied revision's config",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cur job.Job
			if err := g.client().Do(ctxOf(cmd), "GET", jobPath(args[0]), nil, &cur); err != nil {
				return err
			}
			var ans updated
			body := map[string]any{"version": cur.Version, "allowDataLoss": rollbackDataLoss}
			if err := g.client().Do(ctxOf(cmd), "POST", jobPath(args[0])+"/rollback", body, &ans); err != nil {
				return err
			}
			if ans.PendingRevision > 0 {
				return g.printPending(cmd, &ans)
			}
			return g.printOrWatch(cmd, &ans.Job)
		},
	}
	rollback.Flags().BoolVar(&rollbackDataLoss, "allow-data-loss", false, "accept a rollback that drops data")

	inspect := &cobra.Command{
		Use: "inspect JOB_ID", Short: "Read a completed job's resources back from the cloud and show what drifted", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.showDrift(cmd, "POST", jobPath(args[0])+"/inspect")
		},
	}
	drift := &cobra.Command{
		Use: "drift JOB_ID", Short: "Show a job's latest inspection", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.showDrift(cmd, "GET", jobPath(args[0])+"/drift")
		},
	}
	reconcile := &cobra.Command{
		Use: "reconcile JOB_ID", Short: "Run again the steps that own what the latest inspection found drifted", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "POST", jobPath(args[0])+"/reconcile", nil, &j); err != nil {
				return err
			}
			return g.printOrWatch(cmd, &j)
		},
	}
	for _, c := range []*cobra.Command{rollback, reconcile} {
		c.Flags().Bool("watch", false, "follow the job until it settles again")
	}
	return append([]*cobra.Command{revisions, rollback, inspect, drift, reconcile}, newApprovalCommands(g)...)
}

// inspection is an inspection as the API answers it (GET …/drift, POST …/inspect).
type inspection struct {
	JobID       string      `json:"jobID"`
	InspectedAt time.Time   `json:"inspectedAt"`
	DriftCount  int         `json:"driftCount"`
	Drift       []job.Drift `json:"drift"`
}

func (g *globals) showDrift(cmd *cobra.Command, method, path string) error {
	var in inspection
	if err := g.client().Do(ctxOf(cmd), method, path, nil, &in); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if g.output != "table" {
		return g.printOut(w, in, nil, nil)
	}
	fmt.Fprintf(w, "%s inspected %s: %d drifted field(s)\n", in.JobID, in.InspectedAt.UTC().Format(time.RFC3339), in.DriftCount)
	if len(in.Drift) == 0 {
		return nil
	}
	return g.printOut(w, in, []string{"RESOURCE", "FIELD", "APPLIED", "ACTUAL", "STEP"}, func(add func(...any)) {
		for _, d := range in.Drift {
			add(d.Resource.Type+" "+d.Resource.ID, d.Field, planValue(d.Applied), planValue(d.Actual), d.Step)
		}
	})
}
