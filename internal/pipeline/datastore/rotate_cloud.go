package datastore

import (
	"context"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// AdminPasswordSetter is what a provider's Servers also offers when the cloud sets a managed
// server's admin password through its own API (RDS's ModifyDBInstance MasterUserPassword):
// the rotation then needs no network path to the server, which a private cloud database
// usually does not give Groundwork.
type AdminPasswordSetter interface {
	// SetsAdminPassword reports whether the cloud's API sets this engine's admin password;
	// for others the rotation changes it over a connection to the server.
	SetsAdminPassword(engine ds.Engine) bool
	// SetAdminPassword asks the cloud to give the server p.Password; sending the same
	// password again is harmless.
	SetAdminPassword(ctx context.Context, p AdminPasswordParams) error
	// AdminPasswordPending reports whether the cloud is still applying a password change.
	AdminPasswordPending(ctx context.Context, p AdminPasswordParams) (bool, error)
}

// AdminPasswordParams names the job's server and the password it is to take.
type AdminPasswordParams struct {
	JobID    string
	Engine   ds.Engine
	Password string
}

func (p *Pipeline) passwordSetter(provider string, engine ds.Engine) (AdminPasswordSetter, bool) {
	d, ok := p.drivers[provider]
	if !ok || d.Servers == nil {
		return nil, false
	}
	s, ok := d.Servers.(AdminPasswordSetter)
	return s, ok && s.SetsAdminPassword(engine)
}

// setAdminPasswordByAPI is rotate_password's admin change on a cloud server: the password is
// sent once (the step's state records it, in a wait's checkpoint; a crash before that sends
// the same password again), then the step waits until the cloud no longer reports it pending.
// done is true once the server takes it.
func (p *Pipeline) setAdminPasswordByAPI(ctx context.Context, r *pipeline.Run, s AdminPasswordSetter, st RotationState, engine ds.Engine, password string) (res pipeline.Result, done bool, err error) {
	params := AdminPasswordParams{JobID: r.Job.ID, Engine: engine, Password: password}
	if !st.PasswordSent {
		if err := s.SetAdminPassword(ctx, params); err != nil {
			return pipeline.Result{}, false, err
		}
		st.PasswordSent = true
		return pipeline.Wait(p.poll, "the cloud is applying the new admin password", map[string]any{InfraRotation: st}), false, nil
	}
	pending, err := s.AdminPasswordPending(ctx, params)
	if err != nil || pending {
		return pipeline.Wait(p.poll, "the cloud is applying the new admin password", nil), false, err
	}
	return pipeline.Result{}, true, nil
}
