package notify

import (
	"context"
	"errors"
	"fmt"
	"net/smtp"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/remediation"
)

// SMTP mails each message to its recipients (the organisation's admins) through a relay.
type SMTP struct {
	// Addr is the relay's host:port.
	Addr string
	From string
	// Auth, if set, authenticates to the relay (net/smtp refuses PLAIN auth without TLS except
	// on localhost).
	Auth smtp.Auth
	Now  func() time.Time
}

// Channel implements remediation.Notifier.
func (s *SMTP) Channel() string { return "smtp" }

// Notify implements remediation.Notifier. A message without recipients is not sent.
func (s *SMTP) Notify(ctx context.Context, m remediation.Message) (int, error) {
	if len(m.Recipients) == 0 {
		return 0, errors.New("no recipients: the organisation has no admins")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	for _, r := range append([]string{s.From}, m.Recipients...) {
		if strings.ContainsAny(r, "\r\n") {
			return 0, fmt.Errorf("address %q holds a line break", r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n",
		s.From, strings.Join(m.Recipients, ", "), subject(m), now().UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&b, "X-Groundwork-Event: %s\r\n\r\n%s\r\n", m.Kind, strings.ReplaceAll(m.Text, "\n", "\r\n"))
	if err := smtp.SendMail(s.Addr, s.Auth, s.From, m.Recipients, []byte(b.String())); err != nil {
		return 1, fmt.Errorf("send mail through %s: %w", s.Addr, err)
	}
	return 1, nil
}

// subject names the message; resource ids come from requests, so control characters (a line
// break would start a new header) are dropped.
func subject(m remediation.Message) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, subjectText(m))
}

func subjectText(m remediation.Message) string {
	switch m.Kind {
	case remediation.NotifyApprovalRequired:
		return "[Groundwork] Approval required: " + m.Action + " " + m.ResourceID
	case remediation.NotifySucceeded:
		return "[Groundwork] Remediation completed: " + m.Action + " " + m.ResourceID
	case remediation.NotifyFailed:
		return "[Groundwork] Remediation failed: " + m.Action + " " + m.ResourceID
	}
	return "[Groundwork] " + m.Kind
}
