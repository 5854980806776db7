package aws

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/groundworkhq/groundwork/internal/provider/aws/cloudinit"
)

// SSMProbe checks the bootstrap sentinel over SSM Run Command, the exec channel VMs get (no
// SSH). Each call asks once and reads the previous answer: the create-VMs step polls, so a
// command still running simply means "not yet".
type SSMProbe struct {
	client *ssm.Client
	mu     sync.Mutex
	// last holds the command sent per instance, read on the next poll.
	last map[string]string
}

// NewSSMProbe builds the production probe for p's account and region.
func NewSSMProbe(p *Provider) *SSMProbe {
	return &SSMProbe{client: ssm.NewFromConfig(p.cfg), last: map[string]string{}}
}

var _ BootstrapProbe = (*SSMProbe)(nil)

// SentinelPresent implements BootstrapProbe.
func (s *SSMProbe) SentinelPresent(ctx context.Context, instanceID string) (bool, error) {
	s.mu.Lock()
	id, ok := s.last[instanceID]
	s.mu.Unlock()
	if ok {
		out, err := s.client.GetCommandInvocation(ctx, &ssm.GetCommandInvocationInput{CommandId: &id, InstanceId: &instanceID})
		switch {
		case isCode(err, "InvocationDoesNotExist"):
		case err != nil:
			return false, Classify(err, Op{})
		case out.Status == ssmtypes.CommandInvocationStatusSuccess:
			return strings.Contains(deref(out.StandardOutputContent), "present"), nil
		case out.Status == ssmtypes.CommandInvocationStatusPending || out.Status == ssmtypes.CommandInvocationStatusInProgress:
			return false, nil
		}
	}
	out, err := s.client.SendCommand(ctx, &ssm.SendCommandInput{
		DocumentName: ptr("AWS-RunShellScript"), InstanceIds: []string{instanceID},
		Parameters: map[string][]string{"commands": {"test -f " + cloudinit.SentinelPath + " && echo present || echo absent"}},
	})
	if isCode(err, "InvalidInstanceId") {
		// The SSM agent has not registered yet: the VM is still booting.
		return false, nil
	}
	if err != nil {
		return false, Classify(err, Op{})
	}
	s.mu.Lock()
	s.last[instanceID] = deref(out.Command.CommandId)
	s.mu.Unlock()
	return false, nil
}
