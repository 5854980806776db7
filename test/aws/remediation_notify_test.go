package aws

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/groundworkhq/groundwork/internal/app"
	"github.com/groundworkhq/groundwork/internal/app/apptest"
	"github.com/groundworkhq/groundwork/internal/job"
	"github.com/groundworkhq/groundwork/internal/notify"
	"github.com/groundworkhq/groundwork/internal/remediation"
)

const hookSecret = "remediation-hook-secret-0123456789"

// hookReceiver answers 503 to the first failFirst calls of each delivery, then 200, and keeps
// every call with whether its signature verified.
type hookReceiver struct {
	failFirst int
	mu        sync.Mutex
	calls     []hookCall
}

type hookCall struct {
	kind, delivery string
	signed         bool
	msg            remediation.Message
	status         int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := hookCall{kind: r.Header.Get(notify.HeaderEvent), delivery: r.Header.Get(notify.HeaderDelivery),
		signed: notify.Verify([]byte(hookSecret), r.Header.Get(notify.HeaderSignature), body, time.Now(), time.Minute) == nil}
	_ = json.Unmarshal(body, &c.msg)
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := 0
	for _, p := range h.calls {
		if p.delivery == c.delivery {
			seen++
		}
	}
	c.status = http.StatusOK
	if seen < h.failFirst {
		c.status = http.StatusServiceUnavailable
	}
	h.calls = append(h.calls, c)
	w.WriteHeader(c.status)
}

func (h *hookReceiver) delivered(kind string) (ok, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls {
		if c.kind != kind {
			continue
		}
		if c.status == http.StatusOK {
			ok++
		} else {
			failed++
		}
	}
	return ok, failed
}

// The approval gate sends one signed approval-required call to the admins' webhook; a
// receiver that fails twice gets it on the third try, and the delivery record says so. The
// completion is notified only when terminal notifications are on.
func TestRemediationWebhook(t *testing.T) {
	t.Parallel()
	for _, terminal := range []bool{false, true} {
		name := "terminal off"
		if terminal {
			name = "terminal on"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rv := &hookReceiver{failFirst: 2}
			hook := httptest.NewServer(rv)
			t.Cleanup(hook.Close)
			endpoint := motoEnv.Endpoint(t)
			s := apptest.Start(t, app.Options{PollInterval: 100 * time.Millisecond,
				AWS: app.AWSOptions{Poll: 100 * time.Millisecond},
				Remediation: app.RemediationOptions{WebhookURL: hook.URL, WebhookSecret: hookSecret,
					WebhookBackoff: 20 * time.Millisecond, NotifyTerminal: terminal}})
			e := newEnvOn(t, s, endpoint, true)
			id := e.runInstance(t)
			j := waitRemediation(t, s.Client, e.remediate(t, remediation.ActionStop, remediation.TypeEC2Instance, id).ID, job.StatusAwaitingUser)
			gate := approvalStep(t, j)
			if ok, failed := rv.delivered(remediation.NotifyApprovalRequired); ok != 1 || failed != 2 {
				t.Fatalf("approval-required: %d delivered, %d failed tries; want 1 on the third try", ok, failed)
			}
			rv.mu.Lock()
			for _, c := range rv.calls {
				if !c.signed || c.msg.JobID != j.ID || c.msg.StepID != gate.ID || len(c.msg.Recipients) != 1 {
					t.Errorf("call %+v", c)
				}
			}
			rv.mu.Unlock()
			got := getRemediation(t, s.Client, j.ID)
			if len(got.Notifications) != 1 || got.Notifications[0].Status != "delivered" || got.Notifications[0].Attempts != 3 ||
				got.Notifications[0].Channel != "webhook" {
				t.Errorf("delivery record: %+v", got.Notifications)
			}
			if err := s.Client.Do(testCtx(t), http.MethodPost, "/api/remediation-jobs/"+j.ID+"/steps/approval/approve", nil, nil); err != nil {
				t.Fatal(err)
			}
			waitRemediation(t, s.Client, j.ID, job.StatusCompleted)
			ok, _ := rv.delivered(remediation.NotifySucceeded)
			want := 0
			if terminal {
				want = 1
			}
			if ok != want {
				t.Errorf("completion notifications: %d, want %d", ok, want)
			}
			if ok, _ := rv.delivered(remediation.NotifyApprovalRequired); ok != 1 {
				t.Errorf("approval-required delivered %d times over the whole run, want once", ok)
			}
		})
	}
}
