package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestGeneratedManifestsAreCurrent: the manifests under deploy/ that come
// from package render are what it renders now (make generate writes them).
func TestGeneratedManifestsAreCurrent(t *testing.T) {
	out := t.TempDir()
	cmd := testenv.GoCommand(t.Context(), filepath.Join(testenvRoot(), "cmd", "hpp-operator"), "run", "./gendeploy", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gendeploy: %v\n%s", err, b)
	}
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(deployDir(), rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deploy/%s is stale or missing (%v): run make generate", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCSIOnlyDaemonSetIsTheOperators: the csi-only install runs the very
// DaemonSet the operator builds for the same pool and images.
func TestCSIOnlyDaemonSetIsTheOperators(t *testing.T) {
	var rendered *appsv1.DaemonSet
	for _, u := range buildOverlay(t, "csi-only") {
		if u.GetKind() == "DaemonSet" {
			rendered = &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rendered); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkIsTheOperators(t, "csi-only", rendered, false)
}

// checkIsTheOperators fails unless rendered, the DaemonSet of a csi-only
// install (what names it), has the spec of the one the operator builds
// for csi-only's pool and images, with or without the peer transport.
func checkIsTheOperators(t *testing.T, what string, rendered *appsv1.DaemonSet, peer bool) {
	t.Helper()
	if rendered == nil {
		t.Fatalf("%s has no DaemonSet", what)
	}
	want := csiOnlyOperatorDaemonSet(t, peer)
	// A strategic merge patch may reorder named lists; order is no drift.
	normalize(rendered)
	normalize(want)
	if !equality.Semantic.DeepEqual(rendered.Spec, want.Spec) {
		got, _ := json.MarshalIndent(rendered.Spec, "", " ")
		exp, _ := json.MarshalIndent(want.Spec, "", " ")
		t.Errorf("%s: the DaemonSet differs from the operator's:\n got  %s\n want %s", what, got, exp)
	}
}

// csiOnlyOperatorDaemonSet is the DaemonSet the operator builds for
// csi-only's pool and images, with or without the peer transport.
func csiOnlyOperatorDaemonSet(t *testing.T, peer bool) *appsv1.DaemonSet {
	t.Helper()
	cfg := render.DefaultConfig()
	cfg.ManagedBy = "kustomize"
	cfg.PeerTransport = peer
	cfg.Images.CSI = "localhost/hpp/hpp-csi:latest"
	cfg.Images.Provisioner = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
	ds, err := cfg.CSIDaemonSet(&hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpvolumes"}}})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func normalize(ds *appsv1.DaemonSet) {
	spec := &ds.Spec.Template.Spec
	slices.SortFunc(spec.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
	for i := range spec.Containers {
		c := &spec.Containers[i]
		slices.SortFunc(c.Env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(c.VolumeMounts, func(a, b corev1.VolumeMount) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(c.Ports, func(a, b corev1.ContainerPort) int { return strings.Compare(a.Name, b.Name) })
	}
}

func TestSidecarsComponentSwapsRegistrationAndHealth(t *testing.T) {
	for _, u := range buildOverlay(t, "csi-only-sidecars") {
		if u.GetKind() != "DaemonSet" {
			continue
		}
		ds := &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range ds.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
			if c.Name == render.CSIContainerName {
				for _, a := range c.Args {
					if bytes.HasPrefix([]byte(a), []byte("--kubelet-registration-path")) || bytes.HasPrefix([]byte(a), []byte("--health-address")) {
						t.Errorf("hpp-csi still registers itself or serves health with the sidecars: %s", a)
					}
				}
				found := false
				for _, e := range c.Env {
					found = found || e.Name == "PV_DIR" && e.Value == `[{"name":"local","path":"/local-data-dir/csi"}]`
				}
				if !found {
					t.Errorf("the sidecar patch lost the pools: %v", c.Env)
				}
			}
		}
		want := []string{render.CSIContainerName, "csi-provisioner", "node-driver-registrar", "liveness-probe"}
		if len(names) != len(want) {
			t.Fatalf("containers %v, want %v", names, want)
		}
		return
	}
	t.Fatal("no DaemonSet")
}
