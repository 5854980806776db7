package pipeline

import (
	"fmt"

	"github.com/groundworkhq/groundwork/internal/fault"
)

// InfraOf decodes the infra key an earlier step recorded. Its absence is a system fault, not
// the user's: the step order guarantees the key, so a gap means a step or the store misbehaved.
func InfraOf[T any](r *Run, key string) (T, error) {
	var v T
	ok, err := r.Infra(key, &v)
	if err != nil {
		return v, fault.System(err)
	}
	if !ok {
		return v, fault.System(fmt.Errorf("infra %q missing: an earlier step did not record it", key))
	}
	return v, nil
}
