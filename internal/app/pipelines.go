package app

import (
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// builtinPipelines lists the resource families this build provisions.
func builtinPipelines(o Options, ds *datastoreParts) []pipeline.Pipeline {
	var out []pipeline.Pipeline
	if ds.pipeline != nil {
		out = append(out, ds.pipeline)
	}
	return out
}
