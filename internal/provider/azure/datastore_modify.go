package azure

import (
	"context"
	"fmt"
	"strings"

	ds "github.com/groundworkhq/groundwork/internal/datastore"
	"github.com/groundworkhq/groundwork/internal/fault"
	dspipe "github.com/groundworkhq/groundwork/internal/pipeline/datastore"
)

var (
	_ dspipe.Modifier      = DatastoreDriver{}
	_ dspipe.ImmediateOnly = DatastoreDriver{}
	_ dspipe.Explainer     = DatastoreDriver{}
)

// flexModifiable are the settings a flexible server's PATCH changes in place. The engine, its
// version and the name are not among them: the pipeline refuses those before anything is sent.
var flexModifiable = []string{"instanceClass", "allocatedStorageGB", "backupRetentionDays", "multiAZ"}

// opUpdateServer is the key of a server's PATCH in flight in the step's record.
const opUpdateServer = "update server"

// Modifiable implements dspipe.Modifier: flexible servers change in place; an Azure Cache for
// Redis is not modified by Groundwork yet.
func (d DatastoreDriver) Modifiable(e ds.Engine) []string {
	if _, ok := engines[e]; ok {
		return flexModifiable
	}
	return nil
}

// WhyNotModifiable implements dspipe.Explainer: an Azure Cache for Redis keeps the size it was
// made with. Azure scales a cache, but a Basic cache loses its data when it does and a
// Premium one never goes back to a lower tier; Groundwork does not make that call for the
// user yet.
func (d DatastoreDriver) WhyNotModifiable(e ds.Engine, field string) string {
	if e != ds.EngineRedis {
		return ""
	}
	if field == "instanceClass" {
		return "Azure Cache for Redis is not resized by Groundwork yet (scaling a Basic cache drops its data; a Premium cache never returns to a lower tier): make a new datastore with the size you want, or scale the cache in the Azure portal"
	}
	return "Azure Cache for Redis keeps the " + field + " it was made with; make a new datastore with the setting you want"
}

// AppliedAtOnce implements dspipe.ImmediateOnly: a flexible server takes a new compute size
// (a restart) when it is asked; Azure has no way to hold it for the maintenance window.
func (d DatastoreDriver) AppliedAtOnce(e ds.Engine) []string {
	if _, ok := engines[e]; ok {
		return []string{"instanceClass"}
	}
	return nil
}

// Modify implements dspipe.Modifier through the flexible server's PATCH (Servers
// BeginUpdate), one call at a time. A call with no operation on record reads the server:
// with every setting as asked it is done (a re-run after a crash sends nothing); while the
// server is not Ready (an operation under way, this job's whose token was lost before its
// checkpoint, or Azure's own) it waits; otherwise it sends only the settings that differ and
// returns the operation's resume token to record. A call with the token resumes that poller.
func (d DatastoreDriver) Modify(ctx context.Context, p dspipe.ModifyParams) (dspipe.ModifyResult, error) {
	var res dspipe.ModifyResult
	es, ok := engines[p.Engine]
	if !ok {
		return res, fault.UserAction(fmt.Errorf("engine %q is not modified in place on Azure", p.Engine), "UnsupportedUpdate",
			"Make a new datastore with the settings you want.", "")
	}
	pl, err := d.Resolve(ctx, p.JobID)
	if err != nil {
		return res, err
	}
	s, err := d.size(p.Engine, "", p.Settings)
	if err != nil {
		return res, err
	}
	fs, err := flexOf(pl.C, p.Engine)
	if err != nil {
		return res, err
	}
	c, srv := pl.C, serverName(pl.J, es)
	ops, changed := inFlight(p.Data)
	if ops[opUpdateServer] == "" {
		v, err := readServer(ctx, c, pl.J, fs, srv)
		if err != nil {
			return res, err
		}
		if !v.found {
			return res, fault.UserAction(fmt.Errorf("server %s is gone", srv), "ServerGone",
				"The datastore's server no longer exists; delete the job.", "")
		}
		switch {
		case strings.EqualFold(v.state, "Stopped"), strings.EqualFold(v.state, "Disabled"):
			return res, fault.UserAction(fmt.Errorf("server %s is %s", srv, v.state), "ServerStopped",
				"Azure changes a flexible server only while it runs; start it, then retry the job.", c.PortalURL(v.id))
		case !strings.EqualFold(v.state, "Ready"):
			res.Changed, res.Wait = changed, true
			res.Data = map[string]any{"changed": changed}
			return res, nil
		}
		changed = differing(v, s)
		if len(changed) == 0 {
			return res, nil
		}
	}
	done, err := fs.update(ctx, c, ops, opUpdateServer, c.ResourceGroup, srv, s, changed)
	if err != nil {
		return res, err
	}
	res.Changed = changed
	if !done {
		res.Wait = true
		res.Data = map[string]any{"ops": ops, "changed": changed}
	}
	return res, nil
}

// differing names the settings of s the server v does not have. Storage only grows: a disk
// larger than asked (MySQL's storage auto-grow) is left as it is.
func differing(v serverView, s sizing) []string {
	var out []string
	if !strings.EqualFold(v.sku, s.sku) {
		out = append(out, "instanceClass")
	}
	if v.storageGB < s.storageGB {
		out = append(out, "allocatedStorageGB")
	}
	if v.backups != s.backups {
		out = append(out, "backupRetentionDays")
	}
	if v.ha != s.ha {
		out = append(out, "multiAZ")
	}
	return out
}

// inFlight reads Modify's record of the previous call: the operation's token and the
// settings it sends.
func inFlight(data map[string]any) (Ops, []string) {
	ops := Ops{}
	if m, ok := data["ops"].(map[string]any); ok {
		for k, v := range m {
			if s, ok := v.(string); ok {
				ops[k] = s
			}
		}
	}
	var changed []string
	switch l := data["changed"].(type) {
	case []any:
		for _, v := range l {
			if s, ok := v.(string); ok {
				changed = append(changed, s)
			}
		}
	case []string:
		changed = l
	}
	return ops, changed
}
