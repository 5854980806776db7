package catalog

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/groundworkhq/groundwork/internal/job"
)

// Catalog validation answers any config with defaults applied or field errors, never a panic;
// and what it accepts, it accepts again unchanged (defaults are applied once).
func FuzzValidateJob(f *testing.F) {
	c, err := Builtin()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("datastore", []byte(`{"engine":"postgres","version":"16"}`))
	f.Add("kubernetes", []byte(`{"nodeGroups":[{"min":3,"max":1}]}`))
	f.Add("network", []byte(`{"cidr":"10.0.0.0/16"}`))
	f.Fuzz(func(t *testing.T, family string, config []byte) {
		_, out, err := c.ValidateJob(job.Family(family), json.RawMessage(config))
		var ve *ValidationError
		switch {
		case err == nil:
			if !json.Valid(out) {
				t.Fatalf("accepted config is not JSON: %s", out)
			}
			_, again, err := c.ValidateJob(job.Family(family), out)
			if err != nil {
				t.Fatalf("accepted %s, then refused its own output %s: %v", config, out, err)
			}
			if string(again) != string(out) {
				t.Fatalf("defaults applied twice: %s then %s", out, again)
			}
		case errors.As(err, &ve):
			for _, fe := range ve.Fields {
				if fe.Message == "" {
					t.Fatalf("field error without a message: %+v", fe)
				}
			}
		}
	})
}
