package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/groundworkhq/groundwork/internal/api"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/remediation"
)

func newRemediations(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "remediations", Aliases: []string{"remediation"},
		Short: "Run remediation workflows: stop, start, scale or pause a cloud resource, with approval gates"}
	var req remediation.CreateRequest
	var capacity int32
	var wait bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Start a workflow for a recommendation",
		Example: "  groundwork remediations create --space spc_… --recommendation rec_idle_vm \\\n" +
			"    --action stop --resource-type ec2-instance --subject i-0123456789abcdef0",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req.SubjectType = "resource"
			req.Capacity = nil
			if cmd.Flags().Changed("capacity") {
				req.Capacity = &capacity
			}
			var j api.RemediationJob
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/remediation-jobs", req, &j); err != nil {
				return err
			}
			return g.settle(cmd, j, wait)
		},
	}
	create.Flags().BoolVar(&wait, "wait", false, "wait until the workflow waits for a decision or ends")
	create.Flags().StringVar(&req.SpaceID, "space", "", "space the resource lives in (cloud account and region)")
	create.Flags().StringVar(&req.RecommendationID, "recommendation", "", "the recommendation being remediated")
	create.Flags().StringVar(&req.Action, "action", "", "stop, start, scale_to_zero, scale_back or pause")
	create.Flags().StringVar(&req.ResourceType, "resource-type", "", "ec2-instance, rds-instance, asg (or another type, pause only)")
	create.Flags().StringVar(&req.SubjectID, "subject", "", "the resource's id (instance id, DB identifier, ASG name)")
	create.Flags().Int32Var(&capacity, "capacity", 0, "desired capacity scale_back restores")
	for _, f := range []string{"space", "recommendation", "action", "resource-type", "subject"} {
		_ = create.MarkFlagRequired(f)
	}
	var status string
	list := &cobra.Command{
		Use: "list", Short: "List workflows, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/api/remediation-jobs"
			if status != "" {
				path += "?status=" + url.QueryEscape(status)
			}
			var out struct {
				Data []api.RemediationJob `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", path, nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, remediationHeader, func(add func(...any)) {
				for _, j := range out.Data {
					addRemediation(add, j)
				}
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only workflows in this status (e.g. awaiting_user)")
	get := &cobra.Command{
		Use: "get JOB_ID", Short: "Show a workflow and its steps (with their ids)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j api.RemediationJob
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/remediation-jobs/"+url.PathEscape(args[0]), nil, &j); err != nil {
				return err
			}
			return g.printRemediation(cmd, j)
		},
	}
	cancel := &cobra.Command{
		Use: "cancel JOB_ID", Short: "Cancel a running or waiting workflow", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var j api.RemediationJob
			if err := g.client().Do(ctxOf(cmd), "POST", "/api/remediation-jobs/"+url.PathEscape(args[0])+"/cancel", nil, &j); err != nil {
				return err
			}
			return g.printRemediation(cmd, j)
		},
	}
	audit := &cobra.Command{
		Use: "audit JOB_ID", Short: "The workflow's step timeline", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out struct {
				Data []remediation.Event `json:"data"`
			}
			if err := g.client().Do(ctxOf(cmd), "GET", "/api/remediation-jobs/"+url.PathEscape(args[0])+"/audit", nil, &out); err != nil {
				return err
			}
			return g.printOut(cmd.OutOrStdout(), out, []string{"TIME", "STEP", "EVENT", "ACTOR", "REASON"}, func(add func(...any)) {
				for _, e := range out.Data {
					add(e.CreatedAt.Format("2006-01-02T15:04:05Z07:00"), e.StepName, e.EventType, e.Actor, e.Reason)
				}
			})
		},
	}
	cmd.AddCommand(create, list, get, cancel, audit, decideCommand(g, true), decideCommand(g, false))
	return cmd
}

// decideCommand is approve or reject: the gate by its stable id (--step-id) or by name (--step).
func decideCommand(g *globals, approve bool) *cobra.Command {
	verb, short := "reject", "Reject an approval step; the workflow ends cancelled"
	if approve {
		verb, short = "approve", "Approve an approval step; the workflow goes on"
	}
	var stepID, stepName, reason string
	var wait bool
	c := &cobra.Command{
		Use: verb + " JOB_ID (--step-id ID | --step NAME)", Short: short, Args: cobra.ExactArgs(1),
		Example: "  groundwork remediations " + verb + " job_… --step approval --reason \"off-hours window\"",
		RunE: func(cmd *cobra.Command, args []string) error {
			if (stepID == "") == (stepName == "") {
				return fmt.Errorf("name the step with exactly one of --step-id and --step")
			}
			path := "/api/remediation-jobs/" + url.PathEscape(args[0])
			if stepID != "" {
				path += "/steps-by-id/" + url.PathEscape(stepID) + "/" + verb
			} else {
				path += "/steps/" + url.PathEscape(stepName) + "/" + verb
			}
			var body any
			if reason != "" {
				body = map[string]string{"reason": reason}
			}
			var j api.RemediationJob
			if err := g.client().Do(ctxOf(cmd), "POST", path, body, &j); err != nil {
				return err
			}
			return g.settle(cmd, j, wait)
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait until the workflow waits for a decision again or ends")
	c.Flags().StringVar(&stepID, "step-id", "", "the step's stable id (see remediations get)")
	c.Flags().StringVar(&stepName, "step", "", "the step's name in the template (e.g. approval)")
	c.Flags().StringVar(&reason, "reason", "", "why; kept on the timeline")
	return c
}

// settle prints j, first waiting, if asked, until it is no longer queued or running.
func (g *globals) settle(cmd *cobra.Command, j api.RemediationJob, wait bool) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for wait && (j.Status == job.StatusQueued || j.Status == job.StatusRunning) {
		select {
		case <-ctxOf(cmd).Done():
			return ctxOf(cmd).Err()
		case <-t.C:
		}
		if err := g.client().Do(ctxOf(cmd), "GET", "/api/remediation-jobs/"+url.PathEscape(j.ID), nil, &j); err != nil {
			return err
		}
	}
	return g.printRemediation(cmd, j)
}

var remediationHeader = []string{"ID", "STATUS", "ACTION", "SUBJECT", "WAITING AT", "CREATED"}

func addRemediation(add func(...any), j api.RemediationJob) {
	action, _, _ := strings.Cut(j.Name, " ")
	waiting := "-"
	for _, s := range j.Workflow {
		if s.Status == "waiting" && j.Status == "awaiting_user" {
			waiting = s.Name + " (" + s.ID + ")"
		}
	}
	add(j.ID, j.Status, action, j.SubjectID, waiting, j.CreatedAt.Format("2006-01-02T15:04:05Z07:00"))
}

func (g *globals) printRemediation(cmd *cobra.Command, j api.RemediationJob) error {
	if g.output != "table" {
		return g.printOut(cmd.OutOrStdout(), j, nil, nil)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s  %s  %s  (template %s)\n", j.ID, j.Status, j.Name, j.Template)
	if j.Failure != nil {
		fmt.Fprintf(w, "failed at %s (%s): %s\n", j.Failure.Step, j.Failure.Class, j.Failure.Message)
		if j.Failure.FixHint != "" {
			fmt.Fprintf(w, "fix: %s\n", j.Failure.FixHint)
		}
	}
	return g.printOut(w, j, []string{"STEP", "KIND", "STATUS", "STEP ID"}, func(add func(...any)) {
		for _, s := range j.Workflow {
			add(s.Name, s.Kind, s.Status, s.ID)
		}
	})
}
