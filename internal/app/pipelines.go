package app

import (
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// builtinPipelines lists the resource families this build provisions.
func builtinPipelines(ds *datastoreParts, cp *componentParts) []pipeline.Pipeline {
	var out []pipeline.Pipeline
	if ds.pipeline != nil {
		out = append(out, ds.pipeline)
	}
	out = append(out, cp.pipeline)
	return out
}
