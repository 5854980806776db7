package local

import (
	"context"

	"github.com/groundworkhq/groundwork/internal/job"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

// Inspect reads back the server a datastore job made (the jobs service's inspector): it was
// applied running, so a server whose process is gone is drift of its field running, owned by
// the wait_ready step, whose status check starts it again on its data (same port, same
// password). A job whose server was never recorded has nothing here to compare.
func (s Servers) Inspect(ctx context.Context, j *job.Job) ([]job.Drift, error) {
	srv, alive, err := s.P.Find(ctx, j.ID)
	if err != nil || srv.Port == 0 || alive {
		return nil, err
	}
	return []job.Drift{{Resource: job.ResourceRef{Type: string(srv.Engine) + "-server", ID: "local/" + string(srv.Engine) + "/" + j.ID},
		Field: "running", Applied: true, Actual: false, Step: dspipe.StepWaitReady}}, nil
}
