// Package notify delivers remediation notifications: a webhook signed with HMAC-SHA256 and
// retried with backoff, and email over SMTP. Both satisfy remediation.Notifier.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/groundworkhq/groundwork/internal/remediation"
)

// Headers of a webhook call.
const (
	HeaderSignature = "X-Groundwork-Signature"
	HeaderEvent     = "X-Groundwork-Event"
	HeaderDelivery  = "X-Groundwork-Delivery"
)

// Webhook posts each message as JSON to URL. The body is signed: HeaderSignature holds
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under Secret>", so a receiver can
// check both who sent it and that it is fresh. HeaderDelivery is the same on every retry of
// one message, for receivers that deduplicate.
type Webhook struct {
	URL    string
	Secret []byte
	Client *http.Client
	// Attempts bounds the tries of one message (default 4); Backoff is the pause before the
	// second, doubled before each later one (default 500ms).
	Attempts int
	Backoff  time.Duration
	Now      func() time.Time
}

// Channel implements remediation.Notifier.
func (w *Webhook) Channel() string { return "webhook" }

// permanent marks an answer that a retry would not change (a 4xx other than 408 and 429).
type permanent struct{ error }

// Notify implements remediation.Notifier: it tries until the receiver answers 2xx, a
// permanent refusal, or the attempts run out.
func (w *Webhook) Notify(ctx context.Context, m remediation.Message) (int, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("encode notification: %w", err)
	}
	attempts, backoff := w.Attempts, w.Backoff
	if attempts <= 0 {
		attempts = 4
	}
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	delivery := m.JobID + "/" + m.StepID + "/" + m.Kind
	var last error
	for i := 1; i <= attempts; i++ {
		last = w.post(ctx, body, m.Kind, delivery)
		var perm permanent
		if last == nil || errors.As(last, &perm) {
			return i, last
		}
		if i == attempts {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return i, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-t.C:
		}
		backoff *= 2
	}
	return attempts, fmt.Errorf("webhook not delivered after %d attempts: %w", attempts, last)
}

func (w *Webhook) post(ctx context.Context, body []byte, kind, delivery string) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return permanent{fmt.Errorf("webhook request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEvent, kind)
	req.Header.Set(HeaderDelivery, delivery)
	req.Header.Set(HeaderSignature, Sign(w.Secret, now(), body))
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return permanent{fmt.Errorf("webhook refused the call: %s", resp.Status)}
}

// Sign returns the signature header value of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks a signature header against body: the MAC must match and the time must be
// within tolerance of now.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("signature time outside the tolerance")
	}
	if !hmac.Equal([]byte(sig), []byte(mac(secret, ts, body))) {
		return errors.New("signature does not match")
	}
	return nil
}
