package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// openShiftAPIModule is the module whose CRD manifests the OpenShift tests
// install: the real ones, at the version go.mod pins.
const openShiftAPIModule = "github.com/openshift/api"

// OpenShiftCRDPaths are the real CRDs of SecurityContextConstraints and
// APIServer, read from the Go module cache where `go mod download` puts the
// module go.mod requires.
func OpenShiftCRDPaths() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// `go mod download -json` prints the module's directory in the cache.
	cmd := GoCommand(ctx, filepath.Join(RepoRoot(), "cmd", "hpp-operator"), "mod", "download", "-json", openShiftAPIModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w: %s", openShiftAPIModule, err, strings.TrimSpace(stderr.String()))
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", openShiftAPIModule, err)
	}
	if mod.Dir == "" {
		return nil, fmt.Errorf("go mod download %s: no module directory in %q", openShiftAPIModule, out)
	}
	dir := mod.Dir
	return []string{
		filepath.Join(dir, "security", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_securitycontextconstraints.crd.yaml"),
		filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests", "0000_10_config-operator_01_apiservers.crd.yaml"),
	}, nil
}
