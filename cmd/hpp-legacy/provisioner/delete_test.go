package provisioner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// provisioned makes a volume through Provision and returns its PV as the
// library would have saved it, released by its claim.
func (e *env) provisioned(name string) *v1.PersistentVolume {
	e.t.Helper()
	pv, _, err := e.p.Provision(context.Background(), provisionOpts(claim(name, "wffc", selected(testNode)), e.classes["wffc"]))
	if err != nil {
		e.t.Fatal(err)
	}
	pv.Annotations[contract.AnnProvisionedBy] = contract.LegacyProvisionerName
	pv.Status.Phase = v1.VolumeReleased
	// A file in the volume: what must survive every refused delete.
	if err := os.WriteFile(filepath.Join(pv.Spec.HostPath.Path, "data"), []byte("keep"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return pv
}

func TestDeleteByOwner(t *testing.T) {
	e := newEnv(t)
	pv := e.provisioned("c")
	cached := pv.DeepCopy()
	if !e.p.ShouldDelete(context.Background(), pv) {
		t.Fatal("owner: ShouldDelete = false")
	}
	if err := e.p.Delete(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if got := e.entries(); got != nil {
		t.Errorf("PV_DIR holds %q after delete", got)
	}
	if !reflect.DeepEqual(pv, cached) {
		t.Error("Delete modified the PV it was given")
	}
	// Idempotent: the directory is gone, a retry succeeds.
	if err := e.p.Delete(context.Background(), pv); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if got := testutil.ToFloat64(e.p.metrics.deletes.WithLabelValues(ResultDeleted)); got != 2 {
		t.Errorf("deleted count = %v, want 2", got)
	}
}

func TestDeleteByAnotherNodeNeverTouches(t *testing.T) {
	e := newEnv(t)
	pv := e.provisioned("c")
	b := e.newProvisioner("node-b")
	if b.ShouldDelete(context.Background(), pv) {
		t.Error("node-b: ShouldDelete = true for node-a's volume")
	}
	err := b.Delete(context.Background(), pv)
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) || ignored.Reason != `it belongs to node "node-a"` {
		t.Fatalf("node-b Delete = %v, want IgnoredError", err)
	}
	assertFile(t, filepath.Join(pv.Spec.HostPath.Path, "data"))
	if got := e.events(); got != nil {
		t.Errorf("events = %q", got)
	}
}

func TestDeleteRefusesPathsOutsidePVDir(t *testing.T) {
	e := newEnv(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "data"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.dir, "pvc-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, why string }{
		{outside, "it is not a directory directly inside PV_DIR " + e.dir},
		{e.dir, "it is not a directory directly inside PV_DIR " + e.dir},
		{filepath.Dir(e.dir), "it is not a directory directly inside PV_DIR " + e.dir},
		{e.dir + "/../" + filepath.Base(outside), "it is not a directory directly inside PV_DIR " + e.dir},
		{filepath.Join(e.dir, "pvc-x", "sub"), "it is not a directory directly inside PV_DIR " + e.dir},
		{"relative/pvc-x", "it is not an absolute path"},
		{filepath.Join(e.dir, "pvc-link"), `volume id: "pvc-link" is a symbolic link that resolves outside the pool (to "` + outside + `"); volumes are always real directories`},
		{filepath.Join(e.dir, ".hpp-trash"), `volume id: ".hpp-trash" must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`},
		{filepath.Join(e.dir, "lost+found"), `volume id: "lost+found" is reserved: it is the filesystem's recovery directory`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			pv := e.provisioned("c")
			pv.Spec.HostPath.Path = tt.path
			if !e.p.ShouldDelete(context.Background(), pv) {
				t.Fatal("ShouldDelete = false; the owner must look and refuse")
			}
			err := e.p.Delete(context.Background(), pv)
			want := "refusing to delete hostPath \"" + tt.path + "\": " + tt.why + "; nothing was removed (remove it by hand if it really is this volume's data)"
			if err == nil || err.Error() != want {
				t.Fatalf("Delete error:\n got %v\nwant %s", err, want)
			}
			var ignored *controller.IgnoredError
			if errors.As(err, &ignored) {
				t.Error("a refusal must be an error the library reports (VolumeFailedDelete), not ignored")
			}
		})
	}
	assertFile(t, filepath.Join(outside, "data"))
	assertFile(t, filepath.Join(e.dir, "pvc-uid-c", "data"))
	if got := testutil.ToFloat64(e.p.metrics.deletes.WithLabelValues(ResultRefused)); got != float64(len(tests)) {
		t.Errorf("refused count = %v, want %d", got, len(tests))
	}
}

func TestDeleteOwnership(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		edit func(*v1.PersistentVolume)
		why  string
	}{
		{"foreign identity", func(pv *v1.PersistentVolume) { pv.Annotations[contract.AnnIdentity] = "example.com/other" },
			contract.AnnIdentity + ` is "example.com/other", not "` + contract.LegacyProvisionerName + `"`},
		{"no owner annotation", func(pv *v1.PersistentVolume) { delete(pv.Annotations, contract.AnnProvisionOnNode) },
			"it has no " + contract.AnnProvisionOnNode + " annotation naming the node that owns the directory"},
		{"not hostPath", func(pv *v1.PersistentVolume) {
			pv.Spec.HostPath = nil
			pv.Spec.Local = &v1.LocalVolumeSource{Path: e.dir}
		}, "it is not a hostPath volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv := e.provisioned("c")
			path := pv.Spec.HostPath.Path
			tt.edit(pv)
			if e.p.ShouldDelete(context.Background(), pv) {
				t.Error("ShouldDelete = true")
			}
			err := e.p.Delete(context.Background(), pv)
			var ignored *controller.IgnoredError
			if !errors.As(err, &ignored) || ignored.Reason != tt.why {
				t.Fatalf("Delete = %v, want IgnoredError %q", err, tt.why)
			}
			assertFile(t, filepath.Join(path, "data"))
		})
	}
}

// A KubeVirt-made PV (its annotations, no dirvol meta) is deleted by its node.
func TestDeleteKubeVirtVolume(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "pvc-old")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-old", Annotations: map[string]string{
			contract.AnnIdentity:        contract.LegacyProvisionerName,
			contract.AnnProvisionOnNode: testNode,
			contract.AnnProvisionedBy:   contract.LegacyProvisionerName,
		}},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased},
	}
	if !e.p.ShouldDelete(context.Background(), pv) {
		t.Fatal("ShouldDelete = false")
	}
	if err := e.p.Delete(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("stat %s after delete: %v", dir, err)
	}
}

func TestOwnerlessReleasedVolumeGetsOneEvent(t *testing.T) {
	e := newEnv(t)
	pv := e.provisioned("c")
	delete(pv.Annotations, contract.AnnProvisionOnNode)
	b := e.newProvisioner("node-b")
	a := e.newProvisioner(testNode)
	for _, p := range []*Provisioner{a, b, a} {
		if p.ShouldDelete(context.Background(), pv) {
			t.Fatalf("%s: ShouldDelete = true", p.node)
		}
	}
	want := []string{"PersistentVolume/pvc-uid-c Warning NoOwningNode: no node will delete this volume's directory " + pv.Spec.HostPath.Path +
		": it has no " + contract.AnnProvisionOnNode + " annotation naming the node that owns the directory; remove the directory on its node by hand, then delete this PV"}
	if got := e.events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	// Retained volumes are the admin's on purpose: no event.
	e2 := newEnv(t)
	pv2 := e2.provisioned("d")
	delete(pv2.Annotations, contract.AnnProvisionOnNode)
	pv2.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	e2.p.ShouldDelete(context.Background(), pv2)
	if got := e2.events(); got != nil {
		t.Errorf("Retain: events = %q", got)
	}
}

func assertFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("%s must still exist: %v", path, err)
	}
}
