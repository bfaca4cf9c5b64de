//go:build tools

// Package tools imports the command hack/cluster-binaries.sh builds, so that
// `go mod tidy` records every go.sum entry it needs.
package tools

import _ "github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer"
