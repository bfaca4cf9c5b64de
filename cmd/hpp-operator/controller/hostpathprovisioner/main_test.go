package hostpathprovisioner_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// One real kube-apiserver + etcd for the package; each test uses its own
// namespace and removes its CR.
var (
	restCfg    *rest.Config
	skipReason string
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard()) // the reconciler logs through testr
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hpp-envtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	assets, err := testenv.AssetsDir(dir)
	if err != nil {
		skipReason = err.Error()
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "envtest tests need the harness's binaries under CI: %v\n", err)
			return 1
		}
		return m.Run()
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "deploy", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	restCfg, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start envtest (real kube-apiserver from %s): %v\n", assets, err)
		return 1
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop envtest: %v\n", err)
	}
	return code
}

func needEnv(t *testing.T) {
	t.Helper()
	if restCfg == nil {
		// Under CI=true runMain has already failed the package.
		testutil.MissingPrerequisite(t, "envtest needs the harness's kube-apiserver and etcd: %s", skipReason)
	}
}

// eventually polls f until it returns nil; the bound only stops a broken
// test from hanging, it is not a speed assertion.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, what, f)
}
