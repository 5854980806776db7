package gcpfake

import (
	"fmt"
	"time"
)

// Status is a failed operation's google.rpc.Status.
type Status struct {
	Code    int // google.rpc.Code (7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED, …)
	Message string
	// Reason is the ErrorInfo reason (and the compute error code) it carries.
	Reason string
}

// Op is one long-running operation.
type Op struct {
	Service string
	// Name is the operation's name as its API answers it (an id for compute and Cloud SQL,
	// a full path for the google.longrunning APIs).
	Name string
	// Type is the verb ("insert", "delete", "CREATE").
	Type string
	// Target is the full name of the resource the operation works on.
	Target  string
	Started time.Time

	ticks, needed int
	Done          bool
	Err           *Status
	// Response is what a done operation answers (the resource, for google.longrunning).
	Response any
	finish   func() (any, *Status)
}

// State is the operation's status word: PENDING, RUNNING or DONE.
func (o *Op) State() string {
	switch {
	case o.Done:
		return "DONE"
	case o.ticks == 0:
		return "PENDING"
	}
	return "RUNNING"
}

// StartOp starts an operation on the service at host that runs finish when it is done.
// A requestId seen before (on the same service) returns that call's operation and runs
// nothing: Google's answer to a re-sent request.
func (c *Cloud) StartOp(host, name, typ, target, requestID string, finish func() (any, *Status)) (op *Op, repeated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if requestID != "" {
		if op, ok := c.requests[host+" "+requestID]; ok {
			return op, true
		}
	}
	if name == "" {
		name = fmt.Sprintf("operation-%d-%d", time.Now().UnixMilli(), c.next())
	}
	op = &Op{Service: host, Name: name, Type: typ, Target: target, Started: time.Now(), needed: c.ticks, finish: finish}
	c.ops[host+" "+name] = op
	if requestID != "" {
		c.requests[host+" "+requestID] = op
	}
	return op, false
}

// Operation reads an operation by name (a copy, taken under the lock).
func (c *Cloud) Operation(host, name string) (Op, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op, ok := c.ops[host+" "+name]
	if !ok {
		return Op{}, false
	}
	return *op, true
}

// tick advances every unfinished operation of host by one request; the lock is held.
func (c *Cloud) tick(host string) {
	for _, op := range c.ops {
		if op.Service != host || op.Done {
			continue
		}
		op.ticks++
		if op.ticks >= op.needed {
			op.Done = true
			if op.finish != nil {
				// finish runs under the lock: it changes state with c.put and friends.
				op.Response, op.Err = op.finish()
			}
		}
	}
}

// LRO is op as a google.longrunning.Operation (Artifact Registry, Memorystore, Secret
// Manager's siblings): name, metadata, done, and error or response once done.
func LRO(op Op, metadataType string) map[string]any {
	out := map[string]any{"name": op.Name, "metadata": map[string]any{"@type": metadataType,
		"createTime": op.Started.UTC().Format(time.RFC3339Nano), "target": op.Target, "verb": op.Type}}
	if op.Done {
		out["done"] = true
		if op.Err != nil {
			out["error"] = map[string]any{"code": op.Err.Code, "message": op.Err.Message,
				"details": []map[string]any{ErrorInfo(op.Err.Reason, nil)}}
		} else if op.Response != nil {
			out["response"] = op.Response
		}
	}
	return out
}

// Tick advances the unfinished operations of the service at host as one request to it would:
// time passing, for a test that waits on an operation nobody polls.
func (c *Cloud) Tick(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick(host)
}
