package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/smtp"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/notify"
	"github.com/groundworkhq/groundwork/internal/provider"
	"github.com/groundworkhq/groundwork/internal/rbac"
	"github.com/groundworkhq/groundwork/internal/remediation"
	"github.com/groundworkhq/groundwork/internal/store"
)

// RemediationOptions configure remediation workflows and their notifications.
type RemediationOptions struct {
	// WebhookURL, if set, receives every notification, signed with WebhookSecret.
	WebhookURL    string
	WebhookSecret string
	// WebhookAttempts and WebhookBackoff tune the retries (defaults: 4, 500ms).
	WebhookAttempts int
	WebhookBackoff  time.Duration
	// SMTPAddr, if set, mails notifications to the organisation's admins from SMTPFrom.
	SMTPAddr, SMTPFrom, SMTPUsername, SMTPPassword string
	// NotifyTerminal also notifies when a workflow completes or fails.
	NotifyTerminal bool
	// Poll is how long a step waits for the cloud before it looks again (default 5s).
	Poll time.Duration
	// LeaseTTL overrides the workflow's lease (crash tests shorten it).
	LeaseTTL time.Duration
	// AfterDo, if set, runs after each step's Do, before the engine records it.
	AfterDo func(ctx context.Context, j *job.Job, step string)
}

// RemediationFromEnv reads the serve command's remediation settings.
func RemediationFromEnv(getenv func(string) string) RemediationOptions {
	on := strings.ToLower(strings.TrimSpace(getenv("GROUNDWORK_REMEDIATION_NOTIFY_TERMINAL")))
	return RemediationOptions{
		WebhookURL: getenv("GROUNDWORK_REMEDIATION_WEBHOOK_URL"), WebhookSecret: getenv("GROUNDWORK_REMEDIATION_WEBHOOK_SECRET"),
		SMTPAddr: getenv("GROUNDWORK_SMTP_ADDR"), SMTPFrom: getenv("GROUNDWORK_SMTP_FROM"),
		SMTPUsername: getenv("GROUNDWORK_SMTP_USERNAME"), SMTPPassword: getenv("GROUNDWORK_SMTP_PASSWORD"),
		NotifyTerminal: on != "" && on != "0" && on != "false" && on != "no",
	}
}

// notifiers builds the configured channels.
func (o RemediationOptions) notifiers() ([]remediation.Notifier, error) {
	var out []remediation.Notifier
	if o.WebhookURL != "" {
		if len(o.WebhookSecret) < 16 {
			return nil, fmt.Errorf("the remediation webhook needs a signing secret of at least 16 characters (GROUNDWORK_REMEDIATION_WEBHOOK_SECRET)")
		}
		out = append(out, &notify.Webhook{URL: o.WebhookURL, Secret: []byte(o.WebhookSecret), Attempts: o.WebhookAttempts, Backoff: o.WebhookBackoff})
	}
	if o.SMTPAddr != "" {
		if o.SMTPFrom == "" {
			return nil, fmt.Errorf("GROUNDWORK_SMTP_ADDR is set without GROUNDWORK_SMTP_FROM")
		}
		s := &notify.SMTP{Addr: o.SMTPAddr, From: o.SMTPFrom}
		if o.SMTPUsername != "" {
			host, _, _ := strings.Cut(o.SMTPAddr, ":")
			s.Auth = smtp.PlainAuth("", o.SMTPUsername, o.SMTPPassword, host)
		}
		out = append(out, s)
	}
	return out, nil
}

// remediationPipeline runs workflows with the executor of each job's provider.
func remediationPipeline(o RemediationOptions, st store.Full, mods *provider.Registry, log *slog.Logger) (*remediation.Pipeline, error) {
	ns, err := o.notifiers()
	if err != nil {
		return nil, err
	}
	return remediation.New(remediation.Options{
		Executor: mods.Executor,
		Timeline: st, Notifiers: ns, NotifyTerminal: o.NotifyTerminal, Poll: o.Poll, LeaseTTL: o.LeaseTTL,
		AfterDo: o.AfterDo, Logger: log,
		Admins: func(ctx context.Context, orgID string) ([]string, error) {
			as, err := st.ListAssignments(ctx, orgID, "")
			if err != nil {
				return nil, err
			}
			var out []string
			for _, a := range as {
				if a.RoleID == rbac.RoleAdmin && (a.Scope == "" || a.Scope == "org") {
					out = append(out, a.Email)
				}
			}
			return out, nil
		},
	})
}
