package vmpool

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// VM states the VMs step acts on (see VM).
const (
	stateBootstrap = "bootstrap"
	stateReady     = "ready"
)

// Bounds of the console tail quoted in a BootstrapTimeout's fix hint: enough to show where
// cloud-init stopped, small enough for a job record.
const (
	consoleTailLines = 20
	consoleTailBytes = 2048
)

// bootstrapClock returns when each VM still in bootstrap was first seen so (from infra, or
// now for a VM seen for the first time), and the VM whose deadline passed first, if any.
// VMs no longer in bootstrap drop out, so a replaced VM starts its own count.
func (p *Pipeline) bootstrapClock(r *pipeline.Run, c Config, vms []VM) (map[string]time.Time, *VM, error) {
	seen := map[string]time.Time{}
	if _, err := r.Infra(InfraBootstrapSince, &seen); err != nil {
		return nil, nil, fault.System(err)
	}
	now := p.now()
	since := map[string]time.Time{}
	var late *VM
	for i := range vms {
		if vms[i].State != stateBootstrap {
			continue
		}
		t, ok := seen[vms[i].ID]
		if !ok {
			t = now
		}
		since[vms[i].ID] = t
		if now.Sub(t) >= c.BootstrapTimeout() && (late == nil || t.Before(since[late.ID])) {
			late = &vms[i]
		}
	}
	return since, late, nil
}

// bootstrapTimeout is the user_action failure of a VM that missed its bootstrap deadline:
// the hint says what to check and quotes the end of the VM's console output.
func (p *Pipeline) bootstrapTimeout(ctx context.Context, r *pipeline.Run, c Config, d Driver, vm VM, since time.Time) error {
	err := fmt.Errorf("VM %s has been running since %s without writing its bootstrap sentinel (bootstrapTimeoutMinutes %d)",
		vm.ID, since.UTC().Format(time.RFC3339), c.BootstrapTimeoutMinutes)
	var b strings.Builder
	fmt.Fprintf(&b, "VM %s did not finish its bootstrap within %d minutes. Check its cloud-init logs "+
		"(/var/log/cloud-init.log and /var/log/cloud-init-output.log); %s. "+
		"For an image that cannot report its bootstrap, set waitForBootstrap: false; for a slow one, raise bootstrapTimeoutMinutes.",
		vm.ID, c.BootstrapTimeoutMinutes, reportAdvice(r.Job.Provider))
	cr, ok := d.(ConsoleReader)
	if !ok {
		b.WriteString("\nThe console output could not be read: this cloud's driver does not read it.")
		return fault.UserAction(err, "BootstrapTimeout", b.String(), "")
	}
	out, cerr := cr.ConsoleOutput(ctx, vm)
	switch tail := consoleTail(out); {
	case cerr != nil:
		fmt.Fprintf(&b, "\nThe console output could not be read: %v", cerr)
	case tail == "":
		b.WriteString("\nThe console output is empty.")
	default:
		fmt.Fprintf(&b, "\nLast lines of its console output:\n%s", tail)
	}
	return fault.UserAction(err, "BootstrapTimeout", b.String(), "")
}

// reportAdvice is how a VM reports its bootstrap on provider, and so what to check.
func reportAdvice(provider string) string {
	switch provider {
	case "aws":
		return "the sentinel is read over SSM, so the image must run the SSM agent and the VM must reach SSM (through the NAT gateway or VPC endpoints) with its instance profile"
	case "gcp":
		return "the VM reports through a guest attribute, so it must reach the metadata server (metadata.google.internal) with guest attributes enabled"
	}
	return "the VM must be able to report its bootstrap sentinel to the cloud"
}

// ansiEscape matches a terminal escape sequence (colours, cursor moves), which boot logs
// on a serial console are full of.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])`)

// consoleTail is the end of a console output as a fix hint quotes it: its last
// consoleTailLines lines, at most consoleTailBytes bytes, with terminal escapes, carriage
// returns and other control characters dropped.
func consoleTail(out string) string {
	clean := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r >= ' ' && r != 0x7f && r != utf8.RuneError {
			return r
		}
		return -1
	}, ansiEscape.ReplaceAllString(out, ""))
	lines := strings.Split(strings.TrimRight(clean, " \t\n"), "\n")
	if len(lines) > consoleTailLines {
		lines = lines[len(lines)-consoleTailLines:]
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > consoleTailBytes {
		tail = tail[len(tail)-consoleTailBytes:]
		// Start on a whole character, and a whole line where there is one.
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
			tail = tail[i+1:]
		}
	}
	return tail
}
