package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// pins are a tools module's k8s.io/kubernetes version and replace lines.
func pins(t *testing.T, dir string) (string, map[string]string) {
	t.Helper()
	p := filepath.Join(checkout(t), "test", dir, "go.mod")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(p, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	k8s := ""
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/kubernetes" {
			k8s = r.Mod.Version
		}
	}
	replaces := map[string]string{}
	for _, r := range f.Replace {
		replaces[r.Old.Path] = r.New.Path + "@" + r.New.Version
	}
	return k8s, replaces
}

// The suite must test the Kubernetes the cluster runs, and share its build
// cache: test/conformance-tools pins the same k8s.io/kubernetes and the
// same staging modules as test/k8s-tools (it may replace more of them).
func TestToolsPinTheClustersKubernetes(t *testing.T) {
	k8s, clusterReplaces := pins(t, "k8s-tools")
	conf, confReplaces := pins(t, "conformance-tools")
	if k8s == "" || conf != k8s {
		t.Errorf("k8s.io/kubernetes: conformance-tools %q, k8s-tools %q", conf, k8s)
	}
	for mod, to := range clusterReplaces {
		if confReplaces[mod] != to {
			t.Errorf("replace %s: conformance-tools %q, k8s-tools %q", mod, confReplaces[mod], to)
		}
	}
}
