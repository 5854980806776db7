package app

import (
	"github.com/groundworkhq/groundwork/internal/pipeline"
)

// builtinPipelines lists the resource families this build provisions.
func builtinPipelines(o Options) []pipeline.Pipeline {
	return nil
}
