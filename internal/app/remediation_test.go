package app

import "testing"

// Terminal notifications are on only when GROUNDWORK_REMEDIATION_NOTIFY_TERMINAL says so.
func TestRemediationNotifyTerminalFromEnv(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "no": false, "1": true, "true": true, "yes": true} {
		o := RemediationFromEnv(func(k string) string {
			if k == "GROUNDWORK_REMEDIATION_NOTIFY_TERMINAL" {
				return v
			}
			return ""
		})
		if o.NotifyTerminal != want {
			t.Errorf("%q: NotifyTerminal %v, want %v", v, o.NotifyTerminal, want)
		}
	}
	// A webhook without a signing secret is refused at start, not sent unsigned.
	if _, err := (RemediationOptions{WebhookURL: "http://127.0.0.1:1/hook"}).notifiers(); err == nil {
		t.Error("a webhook without a secret was accepted")
	}
}
