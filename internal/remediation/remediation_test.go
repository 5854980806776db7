package remediation

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/job"
)

var uuid = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Step ids are released API: they are pinned here, so a change to a template that would move
// an id fails. A new revision keeps the ids of the steps it keeps.
func TestStepIDsAreStable(t *testing.T) {
	t.Parallel()
	pinned := map[string]string{
		"stop-instance/approval":  "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e02",
		"scale-to-zero/approval":  "c3a9e5b7-62d4-4a0f-8b1e-9f07d4c3a202",
		"pause-service/approval":  "9d27c4e0-3b5a-4f81-a6e2-0c8b7d5f9402",
		"stop-instance/execute":   "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e03",
		"start-instance/validate": "8e41d7a2-0b6f-4f3e-a5c4-21d9b0e6f104",
	}
	seen := map[string]string{}
	for _, tp := range Templates() {
		names := map[string]bool{}
		for _, s := range tp.Steps {
			key := tp.Name + "/" + s.Name
			if !uuid.MatchString(s.ID) {
				t.Errorf("%s: id %q is not a UUID", key, s.ID)
			}
			if other, dup := seen[s.ID]; dup {
				t.Errorf("%s and %s share id %s", key, other, s.ID)
			}
			seen[s.ID] = key
			if names[s.Name] {
				t.Errorf("%s: two steps named %s", tp.Name, s.Name)
			}
			names[s.Name] = true
			if want, ok := pinned[key]; ok && want != s.ID {
				t.Errorf("%s: id %s, was released as %s", key, s.ID, want)
			}
		}
	}
	if len(seen) < len(pinned) {
		t.Fatalf("only %d steps", len(seen))
	}
}

// Actions that take capacity away, or may not be reversible, pass an approval before they act.
func TestDestructiveActionsHaveAnApproval(t *testing.T) {
	t.Parallel()
	for _, tp := range Templates() {
		kinds := []StepKind{}
		for _, s := range tp.Steps {
			kinds = append(kinds, s.Kind)
		}
		act := slices.IndexFunc(kinds, func(k StepKind) bool { return k == KindExecute || k == KindPauseService })
		gate := slices.Index(kinds, KindApproval)
		destructive := tp.Action == ActionStop || tp.Action == ActionScaleToZero || tp.Action == ActionPause
		if act < 0 || kinds[0] != KindPrecondition || kinds[len(kinds)-1] != KindValidate {
			t.Errorf("%s: steps %v", tp.Name, kinds)
		}
		if destructive && (gate < 0 || gate > act) {
			t.Errorf("%s: %s acts without an approval first: %v", tp.Name, tp.Action, kinds)
		}
	}
}

func TestIsDatastore(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]bool{
		"rds-instance": true, "RDS-cluster": true, "aurora-postgresql": true, "cloudsql-instance": true,
		"elasticache-cluster": true, "azure-sql": true, "postgres": true, "mysql-flexible": true,
		"ec2-instance": false, "asg": false, "synapse-pool": false, "dataproc-cluster": false, "": false,
	} {
		if got := IsDatastore(typ); got != want {
			t.Errorf("IsDatastore(%q) = %v, want %v", typ, got, want)
		}
	}
}

func parked(t *testing.T) *job.Job {
	t.Helper()
	tp, err := TemplateFor(ActionStop, TypeEC2Instance)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(Config{Action: ActionStop, ResourceType: TypeEC2Instance, ResourceID: "i-1", Template: tp.Name, Revision: tp.Revision})
	return &job.Job{ID: "job_1", Kind: job.KindRemediation, Status: job.StatusAwaitingUser, Config: cfg,
		Steps: []job.StepRecord{{Name: "precondition", Status: job.StepDone}, {Name: "approval", Status: job.StepWaiting},
			{Name: "execute", Status: job.StepPending}, {Name: "validate", Status: job.StepPending}}}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)
	d := Decision{Approved: true, Actor: "alice@example.com", Reason: "window", At: at}
	for name, tc := range map[string]struct {
		mutate func(j *job.Job)
		key    string
		byName bool
		want   error
	}{
		"by id":               {key: "5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e02"},
		"by name":             {key: "approval", byName: true},
		"a name is not an id": {key: "approval", want: ErrNoSuchStep},
		"not an approval":     {key: "execute", byName: true, want: ErrNoSuchStep},
		"unknown id":          {key: "00000000-0000-0000-0000-000000000000", want: ErrNoSuchStep},
		"not parked":          {key: "approval", byName: true, want: ErrNotAwaiting, mutate: func(j *job.Job) { j.Status = job.StatusQueued }},
		"being cancelled":     {key: "approval", byName: true, want: ErrNotAwaiting, mutate: func(j *job.Job) { j.CancelRequested = true }},
		"gate not reached":    {key: "approval", byName: true, want: ErrNotAwaiting, mutate: func(j *job.Job) { j.Steps[1].Status = job.StepPending }},
		"already decided (race)": {key: "approval", byName: true, want: ErrNotAwaiting, mutate: func(j *job.Job) {
			c, _ := ConfigOf(j)
			c.Decisions = map[string]Decision{"5b0c2f1e-4d1a-4c59-9d0e-3f6a1c2b7e02": d}
			j.Config, _ = json.Marshal(c)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j := parked(t)
			if tc.mutate != nil {
				tc.mutate(j)
			}
			cfg, step, err := Decide(j, tc.key, tc.byName, d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				return
			}
			j.Config = cfg
			c, err := ConfigOf(j)
			if err != nil || step.Name != "approval" || c.Decisions[step.ID] != d {
				t.Fatalf("decision recorded: %+v %+v %v", c.Decisions, step, err)
			}
		})
	}
}

func TestNewJobRefusesBadRequests(t *testing.T) {
	t.Parallel()
	ok := CreateRequest{RecommendationID: "rec_1", SubjectType: "resource", SubjectID: "i-1", SpaceID: "spc_1", Action: ActionStop, ResourceType: TypeEC2Instance}
	two := int32(2)
	for name, tc := range map[string]struct {
		mutate func(r *CreateRequest)
		field  string
	}{
		"no recommendation":      {func(r *CreateRequest) { r.RecommendationID = "" }, "recommendationID"},
		"other subject type":     {func(r *CreateRequest) { r.SubjectType = "cluster" }, "subjectType"},
		"unknown action":         {func(r *CreateRequest) { r.Action = "delete" }, "action"},
		"stop an asg":            {func(r *CreateRequest) { r.ResourceType = TypeASG }, "action"},
		"scale back without one": {func(r *CreateRequest) { r.Action, r.ResourceType = ActionScaleBack, TypeASG }, "capacity"},
		"capacity on a stop":     {func(r *CreateRequest) { r.Capacity = &two }, "capacity"},
		"no space":               {func(r *CreateRequest) { r.SpaceID = "" }, "spaceID"},
	} {
		r := ok
		tc.mutate(&r)
		_, fields := NewJob(&r, "org_a", "aws", func(*job.Job) []job.StepRecord { return nil }, time.Minute, time.Now())
		if !slices.ContainsFunc(fields, func(f FieldError) bool { return f.Field == tc.field }) {
			t.Errorf("%s: fields %+v, want %s named", name, fields, tc.field)
		}
	}
	j, fields := NewJob(&ok, "org_a", "aws", func(*job.Job) []job.StepRecord { return []job.StepRecord{{Name: "x"}} }, time.Minute, time.Now())
	if len(fields) != 0 || j.Kind != job.KindRemediation || j.Family != Family || j.SubjectID != "i-1" || len(j.Steps) != 1 {
		t.Fatalf("a good request: %+v %v", j, fields)
	}
}
