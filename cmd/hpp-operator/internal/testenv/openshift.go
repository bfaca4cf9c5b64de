package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// openShiftAPIModule is the module whose CRD manifests the OpenShift tests
// install: the real ones, at the version go.mod pins.
const openShiftAPIModule = "github.com/openshift/api"

// OpenShiftCRDPaths are the real CRDs of SecurityContextConstraints and
// APIServer, read from the Go module cache where `go list -m` finds the
// module go.mod requires (downloading it if needed).
func OpenShiftCRDPaths() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", openShiftAPIModule)
	cmd.Dir = filepath.Join(RepoRoot(), "cmd", "hpp-operator")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go mod download %s: %w: %s", openShiftAPIModule, err, strings.TrimSpace(stderr.String()))
	}
	cmd = exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", openShiftAPIModule)
	cmd.Dir = filepath.Join(RepoRoot(), "cmd", "hpp-operator")
	stderr.Reset()
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w: %s", openShiftAPIModule, err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	return []string{
		filepath.Join(dir, "security", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_securitycontextconstraints.crd.yaml"),
		filepath.Join(dir, "config", "v1", "zz_generated.crd-manifests", "0000_10_config-operator_01_apiservers.crd.yaml"),
	}, nil
}
