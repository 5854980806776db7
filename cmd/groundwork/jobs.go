package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/groundworkhq/groundwork/internal/job"
)

func newJobs(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Create, follow and manage provisioning jobs"}
	var spec specFlags
	var watch bool
	create := &cobra.Command{
		Use:   "create -f spec.yaml [--space SPACE_ID]",
		Short: "Create a job from a YAML or JSON spec ({spaceID, kind, mode, draft, name, config})",
		Long: "Create a job from a YAML or JSON spec ({spaceID, kind, mode, draft, name, config}).\n" +
			"The space is --space, else the spec's spaceID, else GROUNDWORK_SPACE, so one spec serves\n" +
			"every space. The name defaults to the config's name.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := spec.body(cmd)
			if err != nil {
				return err
			}
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/provisioning-jobs", body, &j); err != nil {
				return err
			}
			if !watch {
				return g.printJob(cmd.OutOrStdout(), &j)
			}
			if g.output == "table" {
				fmt.Fprintf(cmd.OutOrStdout(), "created %s\n", j.ID)
			}
			return g.watch(cmd, j.ID)
		},
	}
	spec.register(create)
	create.Flags().BoolVar(&watch, "watch", false, "follow the job's progress until it settles")

	var status, kind, space string
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"status": status, "kind": kind, "spaceID": space} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if limit > 0 {
				q.Set("limit", fmt.Sprint(limit))
			}
			var page struct {
				Data       []*job.Job `json:"data"`
				NextCursor string     `json:"nextCursor"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioning-jobs?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), page, []string{"ID", "KIND", "STATUS", "PHASE", "PROGRESS", "SPACE", "NAME"}, func(add func(...any)) {
				for _, j := range page.Data {
					add(j.ID, j.Family, j.Status, j.Phase, progress(j), j.SpaceID, j.Name)
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "filter by status")
	list.Flags().StringVar(&kind, "kind", "", "filter by kind")
	list.Flags().StringVar(&space, "space", "", "filter by space ID")
	list.Flags().IntVar(&limit, "limit", 0, "page size")

	get := &cobra.Command{
		Use: "get JOB_ID", Short: "Show a job", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioning-jobs/"+args[0], nil, &j); err != nil {
				return err
			}
			return g.printJob(cmd.OutOrStdout(), &j)
		},
	}
	retry := &cobra.Command{
		Use: "retry JOB_ID", Short: "Retry a failed job from the step that failed", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/provisioning-jobs/"+args[0]+"/retry", nil, &j); err != nil {
				return err
			}
			return g.printOrWatch(cmd, &j)
		},
	}
	cancel := &cobra.Command{
		Use: "cancel JOB_ID", Short: "Cancel a job that has not completed (finished steps are undone)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var cur job.Job
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioning-jobs/"+args[0], nil, &cur); err != nil {
				return err
			}
			if cur.Status == job.StatusCompleted {
				return fmt.Errorf("job %s has completed; use 'groundwork jobs delete %s' to tear it down", cur.ID, cur.ID)
			}
			return g.deleteJob(cmd, args[0])
		},
	}
	del := &cobra.Command{
		Use: "delete JOB_ID", Short: "Tear down what a job created (or cancel it if it has not completed)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return g.deleteJob(cmd, args[0]) },
	}
	watchCmd := &cobra.Command{
		Use: "watch JOB_ID", Short: "Follow a job's steps live; exits non-zero if it fails", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return g.watch(cmd, args[0]) },
	}
	for _, c := range []*cobra.Command{retry, cancel, del} {
		c.Flags().Bool("watch", false, "follow the job until it settles again")
	}
	cmd.AddCommand(create, list, get, retry, cancel, del, watchCmd, newJobsUpdate(g))
	cmd.AddCommand(newConfigCommands(g)...)
	return cmd
}

// printOrWatch prints the job a change answered, or with --watch follows it until it settles.
func (g *globals) printOrWatch(cmd *cobra.Command, j *job.Job) error {
	if w, _ := cmd.Flags().GetBool("watch"); w {
		return g.watch(cmd, j.ID)
	}
	return g.printJob(cmd.OutOrStdout(), j)
}

// specFlags are -f and --space of the commands that send a job spec (jobs create, plan).
type specFlags struct{ file, space string }

func (s *specFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&s.file, "file", "f", "", "spec file (- for standard input)")
	cmd.Flags().StringVar(&s.space, "space", os.Getenv("GROUNDWORK_SPACE"), "space ID; wins over the spec's spaceID (GROUNDWORK_SPACE fills a spec without one)")
	_ = cmd.MarkFlagRequired("file")
}

// body reads the spec file and puts the space into it.
func (s *specFlags) body(cmd *cobra.Command) (any, error) {
	body, err := readSpec(s.file)
	if err != nil {
		return nil, err
	}
	return body, setSpace(body, s.space, cmd.Flags().Changed("space"))
}

// setSpace puts the space into a spec: --space (flag) always, the environment's default only
// where the spec names none.
func setSpace(spec any, space string, flag bool) error {
	m, ok := spec.(map[string]any)
	if !ok {
		return fmt.Errorf("the spec must be a mapping of spaceID, kind, config, ...")
	}
	if _, has := m["spaceID"]; space != "" && (flag || !has) {
		m["spaceID"] = space
	}
	if _, has := m["spaceID"]; !has {
		return fmt.Errorf("the spec names no space: pass --space SPACE_ID or set GROUNDWORK_SPACE")
	}
	return nil
}

// newJobsUpdate is PATCH /api/provisioning-jobs/{id}: rename, retag, promote a draft, run a VM
// operation, resize an ASG pool or, with --config, update the job's config. It reads the job first and sends the version it read, so a
// change made by someone else in between is refused (409) rather than overwritten.
func newJobsUpdate(g *globals) *cobra.Command {
	var name, vmOp string
	var tags []string
	var promote, watch bool
	var minSize, maxSize, desired int32
	var cu configUpdate
	cmd := &cobra.Command{
		Use: "update JOB_ID [--name N] [--tag k=v]... [--promote] [--vm-op attach_lb|detach_lb] [--min N --max N --desired N]\n" +
			"  update JOB_ID --config FILE|- [--dry-run] [--allow-data-loss] [--apply-immediately=false]",
		Short: "Change a job: name and tags, promote a draft, attach or detach a VM pool's load balancer, resize an ASG pool, update its config",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("config") {
				return cu.run(g, cmd, args[0], watch)
			}
			for _, only := range []string{"dry-run", "allow-data-loss", "apply-immediately"} {
				if cmd.Flags().Changed(only) {
					return fmt.Errorf("--%s goes with --config", only)
				}
			}
			body := map[string]any{}
			fl := cmd.Flags()
			if fl.Changed("name") {
				body["name"] = name
			}
			if len(tags) > 0 {
				m := map[string]string{}
				for _, kv := range tags {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return fmt.Errorf("--tag %q: want key=value", kv)
					}
					m[k] = v
				}
				body["tags"] = m
			}
			if promote {
				body["status"] = job.StatusQueued
			}
			if vmOp != "" {
				body["vmOp"] = vmOp
			}
			for flag, v := range map[string]int32{"min": minSize, "max": maxSize, "desired": desired} {
				if fl.Changed(flag) {
					body[flag] = v
				}
			}
			if len(body) == 0 {
				return fmt.Errorf("nothing to change: give --name, --tag, --promote, --vm-op, --min/--max/--desired or --config")
			}
			var cur job.Job
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/provisioning-jobs/"+args[0], nil, &cur); err != nil {
				return err
			}
			body["version"] = cur.Version
			var j job.Job
			if err := g.client().Do(ctxOf(cmd), "PATCH", "/api/provisioning-jobs/"+args[0], body, &j); err != nil {
				return err
			}
			if !watch {
				return g.printJob(cmd.OutOrStdout(), &j)
			}
			return g.watch(cmd, j.ID)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "new name")
	fl.StringArrayVar(&tags, "tag", nil, "tag as key=value (repeat; replaces the job's tags)")
	fl.BoolVar(&promote, "promote", false, "promote a draft to queued")
	fl.StringVar(&vmOp, "vm-op", "", "VM pool operation: attach_lb or detach_lb")
	fl.Int32Var(&minSize, "min", 0, "ASG pool: new minimum size")
	fl.Int32Var(&maxSize, "max", 0, "ASG pool: new maximum size")
	fl.Int32Var(&desired, "desired", 0, "ASG pool: new desired size")
	fl.BoolVar(&watch, "watch", false, "follow the job until it settles again")
	cu.register(cmd)
	return cmd
}

func (g *globals) deleteJob(cmd *cobra.Command, id string) error {
	var j job.Job
	if err := g.client().Do(ctxOf(cmd), "DELETE", "/api/provisioning-jobs/"+id, nil, &j); err != nil {
		return err
	}
	return g.printOrWatch(cmd, &j)
}

// readSpec reads a YAML (or JSON, which is YAML) job spec into a JSON-ready value.
func readSpec(path string) (any, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var v any
	if err := yaml.NewDecoder(r).Decode(&v); err != nil {
		return nil, fmt.Errorf("read spec %s: %w", path, err)
	}
	// YAML carries values JSON cannot (.inf, .nan); say so here rather than fail in the client.
	if _, err := json.Marshal(v); err != nil {
		return nil, fmt.Errorf("read spec %s: not plain JSON data: %w", path, err)
	}
	return v, nil
}

func progress(j *job.Job) string {
	done := 0
	for _, s := range j.Steps {
		if s.Status.Completed() || s.Status == job.StepUndone {
			done++
		}
	}
	return fmt.Sprintf("%d/%d", done, len(j.Steps))
}

func (g *globals) printJob(w io.Writer, j *job.Job) error {
	if g.output != "table" {
		return g.printOut(w, j, nil, nil)
	}
	name := ""
	if j.Name != "" {
		name = "  " + j.Name
	}
	fmt.Fprintf(w, "%s%s  %s  %s (%s)  space %s  version %d\n", j.ID, name, j.Family, j.Status, j.Phase, j.SpaceID, j.Version)
	// One tab-aligned table, so that a long step name or status does not shift the columns.
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, s := range j.Steps {
		fmt.Fprintf(tw, "  %d.\t%s\t%s\t%s\t%s\n", i+1, s.Name, s.Status, attempts(s), stepNote(s))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if j.Failure != nil {
		fmt.Fprintf(w, "failed (%s): %s\n", j.Failure.Class, j.Failure.Message)
		if j.Failure.FixHint != "" {
			fmt.Fprintf(w, "fix: %s\n", cliWords.Replace(j.Failure.FixHint))
		}
		if j.Failure.ConsoleURL != "" {
			fmt.Fprintf(w, "console: %s\n", j.Failure.ConsoleURL)
		}
	}
	return nil
}

// watch prints a line whenever a step changes state, then the final summary.
func (g *globals) watch(cmd *cobra.Command, id string) error {
	out := cmd.OutOrStdout()
	seen := map[string]string{}
	final, err := g.client().Watch(ctxOf(cmd), id, func(j *job.Job) {
		if g.output != "table" {
			return // a document is printed once, when the job settles
		}
		for i, s := range j.Steps {
			key := fmt.Sprintf("%s/%d", s.Status, s.Attempts)
			if seen[s.Name] == key {
				continue
			}
			seen[s.Name] = key
			if s.Status == job.StepPending {
				continue
			}
			msg := ""
			if s.Message != "" {
				msg = "  " + s.Message
			}
			if s.Error != "" {
				msg += "  (" + s.Error + ")"
			}
			fmt.Fprintf(out, "[%d/%d] %-28s %s%s\n", i+1, len(j.Steps), s.Name, s.Status, msg)
		}
	})
	if err != nil {
		return err
	}
	if g.output != "table" {
		if err := g.printOut(out, final, nil, nil); err != nil {
			return err
		}
		if final.Status == job.StatusFailed {
			return errSilent
		}
		return nil
	}
	fmt.Fprintf(out, "job %s %s\n", final.ID, strings.ToUpper(string(final.Status)))
	if final.Status == job.StatusFailed {
		_ = g.printJob(out, final)
		return errSilent
	}
	return nil
}

// attempts shows the attempt count where it tells something: a step that was retried and is
// not settled, or failed. An undone step's count is its forward runs plus its undo, not news.
func attempts(s job.StepRecord) string {
	switch s.Status {
	case job.StepRunning, job.StepWaiting, job.StepFailed:
		if s.Attempts > 1 {
			return fmt.Sprintf("attempt %d", s.Attempts)
		}
	}
	return ""
}

func stepNote(s job.StepRecord) string {
	note := s.Message
	if s.Error != "" {
		if note != "" {
			note += "  "
		}
		note += "error: " + s.Error
	}
	return note
}
