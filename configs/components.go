// Package configs embeds the project's shipped configuration files, so that the binary works
// with no files on disk.
package configs

import _ "embed"

// ComponentsYAML is configs/components.yaml: the curated Helm component catalog.
//
//go:embed components.yaml
var ComponentsYAML []byte
