package deploytest

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
)

func deployDir() string { return filepath.Join(testenv.RepoRoot(), "deploy") }

func testenvRoot() string { return testenv.RepoRoot() }

// overlays are the install paths users apply with kubectl apply -k.
func overlays(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(deployDir(), "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("no overlays under deploy/overlays")
	}
	return out
}

// build renders a kustomization directory.
func build(t *testing.T, fs filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON: kustomize's maps hold int, unstructured wants int64.
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func buildOverlay(t *testing.T, name string) []*unstructured.Unstructured {
	return build(t, filesys.MakeFsOnDisk(), filepath.Join(deployDir(), "overlays", name))
}

// buildInNamespace renders an overlay from a copy of deploy/ in which the
// namespace: line of every overlay says ns: the one edit a user makes.
func buildInNamespace(t *testing.T, name, ns string) []*unstructured.Unstructured {
	t.Helper()
	return build(t, filesys.MakeFsOnDisk(), filepath.Join(copyDeploy(t, ns), "overlays", name))
}

// copyDeploy copies deploy/ to a temporary directory, with the namespace:
// line of every overlay saying ns ("": unchanged), and returns the copy.
func copyDeploy(t *testing.T, ns string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(deployDir(), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(deployDir(), p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if ns != "" && strings.HasPrefix(rel, "overlays"+string(filepath.Separator)) && d.Name() == "kustomization.yaml" {
			b = []byte(strings.ReplaceAll(string(b), "\nnamespace: hostpath-provisioner\n", "\nnamespace: "+ns+"\n"))
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func id(u *unstructured.Unstructured) string {
	ns := u.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return u.GetKind() + " " + ns + u.GetName()
}

// podSpec returns the pod template spec of a workload, or nil.
func podSpec(u *unstructured.Unstructured) map[string]any {
	switch u.GetKind() {
	case "DaemonSet", "Deployment", "StatefulSet", "Job":
		m, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		return m
	}
	return nil
}

func containers(spec map[string]any) []map[string]any {
	var out []map[string]any
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := spec[key].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// images returns every image an object names: container images and, for
// the operator, the *_IMAGE variables of what it deploys.
func images(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	spec := podSpec(u)
	if spec == nil {
		return out
	}
	for _, c := range containers(spec) {
		name, _ := c["name"].(string)
		if img, ok := c["image"].(string); ok {
			out[id(u)+" container "+name] = img
		}
		env, _ := c["env"].([]any)
		for _, e := range env {
			em, _ := e.(map[string]any)
			n, _ := em["name"].(string)
			if v, ok := em["value"].(string); ok && strings.HasSuffix(n, "_IMAGE") {
				out[id(u)+" env "+n] = v
			}
		}
	}
	return out
}

func hasString(v any, s string) []string {
	var hits []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range t {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		case string:
			if strings.Contains(t, s) {
				hits = append(hits, path+"="+t)
			}
		}
	}
	walk("", v)
	return hits
}
