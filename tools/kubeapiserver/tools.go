//go:build tools

// Package tools pins the programs this module builds; the build tag keeps it out of every
// build while `go mod tidy` still records their dependencies.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
