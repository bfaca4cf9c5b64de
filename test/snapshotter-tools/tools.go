//go:build tools

// Package tools imports the commands hack/cluster-binaries.sh builds, so
// that `go mod tidy` records every go.sum entry they need.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
