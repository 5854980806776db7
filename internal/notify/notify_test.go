package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/groundworkhq/groundwork/internal/remediation"
)

var secret = []byte("0123456789abcdef-test-secret")

func message() remediation.Message {
	return remediation.Message{Kind: remediation.NotifyApprovalRequired, OrgID: "org_a", JobID: "job_1", StepID: "stp_1",
		StepName: "approval", Action: "stop", ResourceType: "ec2-instance", ResourceID: "i-1",
		Recipients: []string{"admin@example.com", "ops@example.com"}, Text: "approve it", At: time.Unix(1700000000, 0).UTC()}
}

// receiver answers each call with the next status of script (then 200) and keeps what came.
type receiver struct {
	mu     sync.Mutex
	script []int
	calls  []call
}

type call struct {
	body                 []byte
	sig, event, delivery string
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.calls = append(rv.calls, call{body, r.Header.Get(HeaderSignature), r.Header.Get(HeaderEvent), r.Header.Get(HeaderDelivery)})
	status := http.StatusOK
	if len(rv.calls) <= len(rv.script) {
		status = rv.script[len(rv.calls)-1]
	}
	w.WriteHeader(status)
}

func TestWebhook(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		script   []int
		attempts int
		ok       bool
	}{
		"first try":                       {nil, 1, true},
		"third try after two failures":    {[]int{503, 500}, 3, true},
		"throttled then delivered":        {[]int{429}, 2, true},
		"a refusal is not retried":        {[]int{400}, 1, false},
		"gives up after the last attempt": {[]int{503, 503, 503, 503}, 4, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rv := &receiver{script: tc.script}
			srv := httptest.NewServer(rv)
			defer srv.Close()
			w := &Webhook{URL: srv.URL, Secret: secret, Backoff: time.Millisecond}
			n, err := w.Notify(context.Background(), message())
			if n != tc.attempts || (err == nil) != tc.ok {
				t.Fatalf("attempts %d err %v; want %d ok=%v", n, err, tc.attempts, tc.ok)
			}
			if len(rv.calls) != tc.attempts {
				t.Fatalf("receiver saw %d calls, want %d", len(rv.calls), tc.attempts)
			}
			for _, c := range rv.calls {
				if err := Verify(secret, c.sig, c.body, time.Now(), time.Minute); err != nil {
					t.Errorf("signature: %v", err)
				}
				if c.event != remediation.NotifyApprovalRequired || c.delivery != "job_1/stp_1/"+remediation.NotifyApprovalRequired {
					t.Errorf("headers: %+v", c)
				}
				var m remediation.Message
				if err := json.Unmarshal(c.body, &m); err != nil || m.JobID != "job_1" || len(m.Recipients) != 2 {
					t.Errorf("body: %s %v", c.body, err)
				}
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0)
	good := Sign(secret, now, body)
	for name, tc := range map[string]struct {
		secret []byte
		header string
		body   []byte
		at     time.Time
	}{
		"other secret":  {[]byte("another-secret-value"), good, body, now},
		"changed body":  {secret, good, []byte(`{"a":2}`), now},
		"stale":         {secret, good, body, now.Add(10 * time.Minute)},
		"no mac":        {secret, "t=1700000000", body, now},
		"garbage":       {secret, "hello", body, now},
		"tampered time": {secret, strings.Replace(good, "t=1700000000", "t=1700000001", 1), body, now},
	} {
		if err := Verify(tc.secret, tc.header, tc.body, tc.at, time.Minute); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := Verify(secret, good, body, now, time.Minute); err != nil {
		t.Fatalf("the good signature: %v", err)
	}
}

// mailbox is an in-process SMTP server that keeps what it is sent.
type mailbox struct {
	mu   sync.Mutex
	msgs []mail
}

type mail struct {
	from string
	to   []string
	data string
}

type session struct {
	box *mailbox
	m   mail
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{box: b}, nil }
func (s *session) Reset()                                      { s.m = mail{} }
func (s *session) Logout() error                               { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.m.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.m.to = append(s.m.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.m.data = string(b)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.m)
	s.box.mu.Unlock()
	return nil
}

func TestSMTP(t *testing.T) {
	t.Parallel()
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	m := message()
	m.ResourceID = "i-1\r\nBcc: victim@example.com"
	s := &SMTP{Addr: ln.Addr().String(), From: "groundwork@example.com"}
	if n, err := s.Notify(context.Background(), m); err != nil || n != 1 {
		t.Fatalf("send: %d %v", n, err)
	}
	box.mu.Lock()
	defer box.mu.Unlock()
	if len(box.msgs) != 1 {
		t.Fatalf("%d messages", len(box.msgs))
	}
	got := box.msgs[0]
	if got.from != "groundwork@example.com" || strings.Join(got.to, ",") != "admin@example.com,ops@example.com" {
		t.Errorf("envelope: %+v", got)
	}
	if !strings.Contains(got.data, "Subject: [Groundwork] Approval required: stop i-1Bcc: victim@example.com\r\n") ||
		strings.Contains(got.data, "\r\nBcc:") || !strings.Contains(got.data, "approve it") {
		t.Errorf("message:\n%s", got.data)
	}
	m.Recipients = nil
	if _, err := s.Notify(context.Background(), m); err == nil || !strings.Contains(err.Error(), "no recipients") {
		t.Errorf("without recipients: %v", err)
	}
	if _, err := (&SMTP{Addr: "127.0.0.1:1", From: "x@example.com"}).Notify(context.Background(), message()); err == nil {
		t.Error("an unreachable relay reported delivery")
	} else if errors.Is(err, context.Canceled) {
		t.Errorf("unexpected error: %v", err)
	}
}
