package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/pipeline"
	"github.com/groundworkhq/groundwork/internal/secrets"
	"github.com/groundworkhq/groundwork/internal/validation"
)

// A credential rotation runs as four steps appended to a completed datastore job, under its
// lease like any other step, so that a crash at any point resumes from the job's record:
//
//	rotate_secret       a new secret version is written (or the one the user gave is taken)
//	rotate_password     the server's password becomes the new one
//	rotate_connections  every record holding the old reference is moved to the new one
//	rotate_retire       the new password is proven, then the old version is deleted
//
// The old version stays until the last step, so a rotation cut short anywhere leaves a job
// whose records all name a secret holding the password the server takes (before
// rotate_password's checkpoint: rotation.newRef in infra holds it).
const (
	StepRotateSecret      = "rotate_secret"
	StepRotatePassword    = "rotate_password"
	StepRotateConnections = "rotate_connections"
	StepRotateRetire      = "rotate_retire"
)

// RotationSteps lists the rotation's steps in order.
var RotationSteps = []string{StepRotateSecret, StepRotatePassword, StepRotateConnections, StepRotateRetire}

// Rotation targets.
const (
	// RotateAdmin rotates the server's admin login (job-scoped connections hold it).
	RotateAdmin = "admin"
	// RotateDatabase rotates a database owner's login (that database's connections hold it).
	RotateDatabase = "database"
)

// InfraRotation is the infra key recording the last rotation's progress (references only).
const InfraRotation = "rotation"

// configRotation is the config key holding the last requested rotation. Its presence is what
// lays out the rotation steps, so the step list depends only on the config, as the engine
// requires.
const configRotation = "rotation"

// Rotation is a requested credential rotation, as the job's config records it.
type Rotation struct {
	// ID names this rotation; the generated secret version is stored under a name derived
	// from it, so a re-run of rotate_secret lands on the same reference.
	ID     string `json:"id"`
	Target string `json:"target"`
	// DatabaseID is the database whose owner is rotated (target database).
	DatabaseID string `json:"databaseID,omitempty"`
	// ConnectionID is the connection the request named, kept for the record.
	ConnectionID string `json:"connectionID,omitempty"`
	// SecretRef is the new version the user gave, already in the secret store (an adopted
	// server's admin password: Groundwork does not own it and only records the change).
	SecretRef string `json:"secretRef,omitempty"`
}

// RotationState is what the rotation steps record under InfraRotation.
type RotationState struct {
	ID         string `json:"id"`
	Target     string `json:"target"`
	DatabaseID string `json:"databaseID,omitempty"`
	OldRef     string `json:"oldRef"`
	NewRef     string `json:"newRef"`
	// PasswordSent: the new admin password went to the cloud's API (AdminPasswordSetter).
	PasswordSent bool `json:"passwordSent,omitempty"`
	// Changed: the server takes the new password and the job's admin endpoint names it.
	Changed bool `json:"changed,omitempty"`
	// Repointed counts the database and connection records moved to NewRef.
	Repointed int `json:"repointed,omitempty"`
	// Retired: OldRef is deleted; the rotation is over.
	Retired bool `json:"retired,omitempty"`
}

// RotationRecords is what the rotation needs of the database and connection records.
type RotationRecords interface {
	GetDatabase(ctx context.Context, jobID, id string) (ds.Database, error)
	RepointDatastoreSecret(ctx context.Context, jobID, oldRef, newRef string) (int, error)
}

// RotationSecretName is the name a rotation's new secret version is stored under.
func RotationSecretName(jobID, rotationID string) string { return jobID + "/rotations/" + rotationID }

// rotationOf returns the rotation j's config requests, if any.
func rotationOf(j *job.Job) (Rotation, bool, error) {
	var cfg struct {
		Rotation *Rotation `json:"rotation"`
	}
	if err := json.Unmarshal(j.Config, &cfg); err != nil {
		return Rotation{}, false, fmt.Errorf("decode rotation: %w", err)
	}
	if cfg.Rotation == nil {
		return Rotation{}, false, nil
	}
	return *cfg.Rotation, true, nil
}

// RotationStateOf returns the rotation progress j records, if any.
func RotationStateOf(j *job.Job) (RotationState, bool, error) {
	var st RotationState
	ok, err := (&pipeline.Run{Job: j}).Infra(InfraRotation, &st)
	return st, ok, err
}

func (p *Pipeline) rotationSteps() []pipeline.Step {
	return []pipeline.Step{
		{Name: StepRotateSecret, Do: p.rotateSecret, Undo: p.undoRotation},
		{Name: StepRotatePassword, Do: p.rotatePassword},
		{Name: StepRotateConnections, Do: p.rotateConnections},
		{Name: StepRotateRetire, Do: p.rotateRetire},
	}
}

// PlanRotation lays a rotation out on a datastore job: the job's new config and step records,
// which the engine then runs like any pending steps. The job must be completed, or have failed
// in an earlier rotation before the server's password changed (a rotation that got further is
// finished by retrying the job). Refusals are validation errors naming the request's field.
func (p *Pipeline) PlanRotation(j *job.Job, rot Rotation) (json.RawMessage, []job.StepRecord, error) {
	if j.Family != job.FamilyDatastore {
		return nil, nil, validation.New("target", "kind", "this job is "+string(j.Family))
	}
	switch rot.Target {
	case RotateAdmin:
		if j.Mode == job.ModeAdopt && rot.SecretRef == "" {
			return nil, nil, validation.New("adminPassword", ds.RuleRequired,
				"is required: Groundwork does not own an adopted server's password; change it on the server and give the new one")
		}
		if j.Mode != job.ModeAdopt && rot.SecretRef != "" {
			return nil, nil, validation.New("adminPassword", "forbidden", "is only taken for an adopted datastore; Groundwork generates this one")
		}
	case RotateDatabase:
		if rot.DatabaseID == "" {
			return nil, nil, validation.New("connection", ds.RuleRequired, "must name a connection")
		}
		if rot.SecretRef != "" {
			return nil, nil, validation.New("adminPassword", "forbidden", "is only taken for the admin credential of an adopted datastore")
		}
	default:
		return nil, nil, validation.New("target", ds.RuleEnum, "must be admin")
	}
	if rot.ID == "" {
		return nil, nil, errors.New("rotation without an id")
	}
	prev, hasPrev, err := RotationStateOf(j)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case j.Status == job.StatusCompleted:
	case j.Status == job.StatusFailed && j.Failure != nil && slices.Contains(RotationSteps, j.Failure.Step) &&
		!(hasPrev && prev.Changed && !prev.Retired):
		// The failed rotation changed nothing on the server: a new one replaces it.
	default:
		return nil, nil, &Busy{Detail: "credentials rotate on a completed datastore job; this one is " + string(j.Status) +
			rotationHint(j, prev, hasPrev)}
	}
	var cfg map[string]any
	if err := json.Unmarshal(j.Config, &cfg); err != nil || cfg == nil {
		return nil, nil, validation.New("config", "type", "the job's config is not an object")
	}
	cfg[configRotation] = rot
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	steps := slices.Clone(j.Steps)
	if i := j.StepIndex(StepRotateSecret); i >= 0 {
		steps = steps[:i]
	}
	for _, name := range RotationSteps {
		steps = append(steps, job.StepRecord{Name: name, Status: job.StepPending, Message: "rotation " + rot.ID})
	}
	return config, steps, nil
}

func rotationHint(j *job.Job, prev RotationState, hasPrev bool) string {
	if j.Status == job.StatusFailed && hasPrev && prev.Changed && !prev.Retired {
		return "; the last rotation already changed the password: retry the job to finish it"
	}
	return ""
}

// Busy refuses a rotation of a job that is not where a rotation can start (the API's 409).
type Busy struct{ Detail string }

func (b *Busy) Error() string { return b.Detail }

// rotation returns the requested rotation and, when rotate_secret has recorded it, its state.
func (p *Pipeline) rotation(r *pipeline.Run) (Rotation, RotationState, error) {
	rot, ok, err := rotationOf(r.Job)
	if err != nil {
		return rot, RotationState{}, fault.System(err)
	}
	if !ok {
		return rot, RotationState{}, fault.System(errors.New("no rotation in the job's config"))
	}
	st, _, err := RotationStateOf(r.Job)
	if err != nil {
		return rot, st, fault.System(err)
	}
	if r.Step != StepRotateSecret && (st.ID != rot.ID || st.NewRef == "") {
		return rot, st, fault.System(fmt.Errorf("rotation %s is not recorded: rotate_secret has not run", rot.ID))
	}
	return rot, st, nil
}

// currentRef returns the reference the target's records hold now.
func (p *Pipeline) currentRef(ctx context.Context, r *pipeline.Run, target, databaseID string) (string, error) {
	if target == RotateAdmin {
		var cr credentialsInfra
		if _, err := r.Infra(InfraCredentials, &cr); err != nil {
			return "", fault.System(err)
		}
		if cr.SecretRef == "" {
			return "", fault.System(errors.New("no admin credentials recorded"))
		}
		return cr.SecretRef, nil
	}
	d, err := p.database(ctx, r, databaseID)
	if err != nil {
		return "", err
	}
	return d.Endpoint.SecretRef, nil
}

func (p *Pipeline) database(ctx context.Context, r *pipeline.Run, id string) (ds.Database, error) {
	if p.records == nil {
		return ds.Database{}, fault.System(errors.New("the datastore pipeline has no records to rotate a database's credential"))
	}
	d, err := p.records.GetDatabase(ctx, r.Job.ID, id)
	if errors.Is(err, ds.ErrNotFound) {
		return d, fault.UserAction(err, "DatabaseGone", "The database was deleted; its credential has nothing left to rotate.", "")
	}
	if err != nil {
		return d, fault.Transient(err)
	}
	if d.Status != ds.StatusReady {
		return d, fault.UserAction(fmt.Errorf("database %s is %s", d.ID, d.Status), "DatabaseNotReady",
			"Rotate the credential once the database is ready.", "")
	}
	return d, nil
}

func (p *Pipeline) rotateSecret(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	rot, st, err := p.rotation(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if st.ID == rot.ID && st.NewRef != "" {
		return pipeline.Done(nil), nil
	}
	sec := p.secretsOf(r)
	if st.ID != "" && !st.Retired {
		// An earlier rotation failed before it changed anything: its new version was never
		// used, and goes unless the records already name it.
		if cur, err := p.currentRef(ctx, r, st.Target, st.DatabaseID); err == nil && cur != st.NewRef && st.NewRef != rot.SecretRef {
			if err := sec.Delete(ctx, st.NewRef); err != nil {
				return pipeline.Result{}, fault.Transient(fmt.Errorf("delete an abandoned secret version: %w", err))
			}
		}
	}
	oldRef, err := p.currentRef(ctx, r, rot.Target, rot.DatabaseID)
	if err != nil {
		return pipeline.Result{}, err
	}
	newRef := rot.SecretRef
	if newRef == "" {
		// A re-run before the checkpoint writes another value under the same reference; nothing
		// has used the first one yet.
		if newRef, err = sec.Put(ctx, RotationSecretName(r.Job.ID, rot.ID), ds.GeneratePassword()); err != nil {
			return pipeline.Result{}, fault.Transient(fmt.Errorf("store the new secret version: %w", err))
		}
	} else if _, err := sec.Get(ctx, newRef); err != nil {
		return pipeline.Result{}, fault.UserAction(fmt.Errorf("new admin password: %w", err), "SecretMissing",
			"Request the rotation again, giving the password.", "")
	}
	if newRef == oldRef {
		return pipeline.Result{}, fault.System(fmt.Errorf("the new secret version is the current one (%s)", oldRef))
	}
	return pipeline.Done(map[string]any{InfraRotation: RotationState{ID: rot.ID, Target: rot.Target, DatabaseID: rot.DatabaseID,
		OldRef: oldRef, NewRef: newRef}}), nil
}

// adminConn is the login to the job's admin endpoint, without its password, and the endpoint
// itself. An adopted server is dialled through the outbound policy.
func (p *Pipeline) adminConn(r *pipeline.Run) (ds.Conn, ConnectionInfra, error) {
	var ep ConnectionInfra
	ok, err := r.Infra(InfraConnection, &ep)
	if err != nil {
		return ds.Conn{}, ep, fault.System(err)
	}
	if !ok {
		return ds.Conn{}, ep, fault.System(errors.New("no admin endpoint recorded: the register step has not run"))
	}
	c := ds.Conn{Engine: ep.Engine, Host: ep.Host, Port: ep.Port, User: ep.User}
	if r.Job.Mode == job.ModeAdopt {
		c.Dial = p.outbound.DialContext
	}
	return c, ep, nil
}

func (p *Pipeline) secretValue(ctx context.Context, r *pipeline.Run, ref string) (string, error) {
	v, err := p.secretsOf(r).Get(ctx, ref)
	if errors.Is(err, secrets.ErrNotFound) {
		return "", fault.System(fmt.Errorf("secret %s: %w", ref, err))
	}
	if err != nil {
		return "", fault.Transient(err)
	}
	return v, nil
}

func (p *Pipeline) rotatePassword(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	_, st, err := p.rotation(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	newPW, err := p.secretValue(ctx, r, st.NewRef)
	if err != nil {
		return pipeline.Result{}, err
	}
	admin, ep, err := p.adminConn(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if st.Target == RotateDatabase {
		d, err := p.database(ctx, r, st.DatabaseID)
		if err != nil {
			return pipeline.Result{}, err
		}
		if admin.Password, err = p.secretValue(ctx, r, ep.SecretRef); err != nil {
			return pipeline.Result{}, err
		}
		// Setting the owner's password is what creating the database does on a re-run; the
		// admin login is unchanged, so a re-run after a crash sets the same password again.
		if err := ds.CreateDatabase(ctx, admin, d.Name, d.Owner, newPW); err != nil {
			return pipeline.Result{}, err
		}
		st.Changed = true
		return pipeline.Done(map[string]any{InfraRotation: st}), nil
	}
	withNew := admin
	withNew.Password = newPW
	if setter, ok := p.passwordSetter(r.Job.Provider, ep.Engine); ok && r.Job.Mode != job.ModeAdopt {
		// A cloud server's password is the cloud's to set: no connection to the server.
		res, done, err := p.setAdminPasswordByAPI(ctx, r, setter, st, ep.Engine, newPW)
		if err != nil || !done {
			return res, err
		}
	} else {
		err = ds.Check(ctx, withNew)
	}
	switch {
	case err == nil:
		// The server takes it already: an adopted server the user changed, or a re-run after
		// a crash that followed the change.
	case r.Job.Mode == job.ModeAdopt || !ds.IsAuthFailure(err):
		return pipeline.Result{}, err
	default:
		withOld := admin
		if withOld.Password, err = p.secretValue(ctx, r, st.OldRef); err != nil {
			return pipeline.Result{}, err
		}
		if err := ds.SetOwnPassword(ctx, withOld, newPW); err != nil {
			return pipeline.Result{}, err
		}
	}
	var cr credentialsInfra
	if _, err := r.Infra(InfraCredentials, &cr); err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	// The admin endpoint moves in the same checkpoint as the change, so that once it is on
	// record every later step and every request reads the password the server takes.
	cr.SecretRef, ep.SecretRef, st.Changed = st.NewRef, st.NewRef, true
	res := pipeline.Done(map[string]any{InfraRotation: st, InfraCredentials: cr, InfraConnection: ep})
	res.Message = "the server takes the new admin password"
	return res, nil
}

func (p *Pipeline) rotateConnections(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	_, st, err := p.rotation(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if p.records == nil {
		return pipeline.Result{}, fault.System(errors.New("the datastore pipeline has no records to repoint"))
	}
	n, err := p.records.RepointDatastoreSecret(ctx, r.Job.ID, st.OldRef, st.NewRef)
	if err != nil {
		return pipeline.Result{}, fault.Transient(err)
	}
	st.Repointed += n
	res := pipeline.Done(map[string]any{InfraRotation: st})
	res.Message = fmt.Sprintf("%d records moved to the new secret version", n)
	return res, nil
}

func (p *Pipeline) rotateRetire(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	_, st, err := p.rotation(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	newPW, err := p.secretValue(ctx, r, st.NewRef)
	if err != nil {
		return pipeline.Result{}, err
	}
	c, _, err := p.adminConn(r)
	if err != nil {
		return pipeline.Result{}, err
	}
	if st.Target == RotateDatabase {
		d, err := p.database(ctx, r, st.DatabaseID)
		if err != nil {
			return pipeline.Result{}, err
		}
		c.User, c.Database = d.Owner, d.Name
	}
	c.Password = newPW
	// Proven before the old version goes: a failure here keeps both, and the job says why. A
	// password the cloud's API set is proven by the cloud, which rotate_password waited on
	// until it no longer reported the change pending: Groundwork may have no network path to
	// a private cloud server.
	if !(st.Target == RotateAdmin && st.PasswordSent) {
		if err := ds.Check(ctx, c); err != nil {
			return pipeline.Result{}, err
		}
	}
	// A connection a request made from the old endpoint while the rotation ran may have been
	// written after rotate_connections: it moves too, before the version it names goes.
	if p.records != nil {
		n, err := p.records.RepointDatastoreSecret(ctx, r.Job.ID, st.OldRef, st.NewRef)
		if err != nil {
			return pipeline.Result{}, fault.Transient(err)
		}
		st.Repointed += n
	}
	if err := p.secretsOf(r).Delete(ctx, st.OldRef); err != nil {
		return pipeline.Result{}, fault.Transient(fmt.Errorf("delete the old secret version: %w", err))
	}
	st.Retired = true
	res := pipeline.Done(map[string]any{InfraRotation: st})
	res.Message = "rotation " + st.ID + " complete; the old secret version is deleted"
	return res, nil
}

// undoRotation, on teardown, deletes whichever of the last rotation's versions the records do
// not name (a rotation cut short leaves one); the one they name goes with the job's other
// secrets.
func (p *Pipeline) undoRotation(ctx context.Context, r *pipeline.Run) (pipeline.Result, error) {
	st, ok, err := RotationStateOf(r.Job)
	if err != nil {
		return pipeline.Result{}, fault.System(err)
	}
	if !ok || st.Retired {
		return pipeline.Done(nil), nil
	}
	cur, err := p.currentRef(ctx, r, st.Target, st.DatabaseID)
	if err != nil && fault.ClassOf(err) == job.ClassTransient {
		return pipeline.Result{}, err
	}
	for _, ref := range []string{st.OldRef, st.NewRef} {
		if ref != "" && ref != cur {
			if err := p.secretsOf(r).Delete(ctx, ref); err != nil {
				return pipeline.Result{}, fault.Transient(fmt.Errorf("delete a rotation's secret version: %w", err))
			}
		}
	}
	return pipeline.Done(nil), nil
}
