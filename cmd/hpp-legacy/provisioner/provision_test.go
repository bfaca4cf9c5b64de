package provisioner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func provisionOpts(c *v1.PersistentVolumeClaim, class *storagev1.StorageClass) controller.ProvisionOptions {
	return controller.ProvisionOptions{StorageClass: class, PVName: "pvc-" + string(c.UID), PVC: c}
}

func TestProvisionCreatesDirectoryAndPV(t *testing.T) {
	e := newEnv(t)
	retain := v1.PersistentVolumeReclaimRetain
	sc := e.classes["wffc"].DeepCopy()
	sc.ReclaimPolicy = &retain
	c := claim("data", "wffc", selected(testNode))
	c.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("5Gi")
	c.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}
	cachedClaim, cachedClass := c.DeepCopy(), sc.DeepCopy()

	pv, state, err := e.p.Provision(context.Background(), provisionOpts(c, sc))
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision = %v, %v", state, err)
	}
	path := filepath.Join(e.dir, "pvc-uid-data")
	dirType, fsMode := v1.HostPathDirectory, v1.PersistentVolumeFilesystem
	want := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-data", Annotations: map[string]string{
			contract.AnnIdentity:        contract.LegacyProvisionerName,
			contract.AnnProvisionOnNode: testNode,
		}},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod},
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("5Gi")},
			VolumeMode:                    &fsMode,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &dirType}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{testHostname}}},
			}}}},
		},
	}
	if !equality.Semantic.DeepEqual(pv, want) {
		t.Errorf("PV:\n got %+v\nwant %+v", pv, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("%s: mode %v, want a directory with 0777 (as the KubeVirt provisioner makes them)", path, fi.Mode())
	}
	if !reflect.DeepEqual(e.labeler.paths, []string{path}) {
		t.Errorf("relabelled %q, want [%s]", e.labeler.paths, path)
	}
	if !reflect.DeepEqual(c, cachedClaim) || !reflect.DeepEqual(sc, cachedClass) {
		t.Error("Provision modified the claim or class it was given (informer cache objects)")
	}
	// The PV must not share memory with the cache either.
	pv.Spec.AccessModes[0] = v1.ReadOnlyMany
	if c.Spec.AccessModes[0] != v1.ReadWriteOncePod {
		t.Error("PV access modes alias the claim's")
	}
	if got := testutil.ToFloat64(e.p.metrics.provisions.WithLabelValues(ResultProvisioned)); got != 1 {
		t.Errorf("provisioned count = %v, want 1", got)
	}
	if got := e.events(); got != nil {
		t.Errorf("events = %q, want none for a plain claim", got)
	}

	// Idempotent: a retry (say the PV could not be saved) returns the same.
	again, _, err := e.p.Provision(context.Background(), provisionOpts(c, sc))
	if err != nil || !equality.Semantic.DeepEqual(again, want) {
		t.Errorf("second Provision = %+v, %v", again, err)
	}
	if got := e.entries(); !reflect.DeepEqual(got, []string{"pvc-uid-data"}) {
		t.Errorf("PV_DIR holds %q", got)
	}
}

func TestProvisionNamingPrefix(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.UseNamingPrefix = true })
	c := claim("my-claim", "immediate", onNode(testNode))
	pv, _, err := e.p.Provision(context.Background(), provisionOpts(c, e.classes["immediate"]))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(e.dir, "my-claim-pvc-uid-my-claim")
	if pv.Spec.HostPath.Path != want {
		t.Errorf("path = %s, want %s", pv.Spec.HostPath.Path, want)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaim policy = %s, want Delete (class has none)", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if got := e.entries(); !reflect.DeepEqual(got, []string{"my-claim-pvc-uid-my-claim"}) {
		t.Errorf("PV_DIR holds %q", got)
	}
}

func TestProvisionRefusals(t *testing.T) {
	block := v1.PersistentVolumeBlock
	long := strings.Repeat("a", 220)
	tests := []struct {
		name   string
		edit   func(*v1.PersistentVolumeClaim)
		prefix bool
		want   string
	}{
		{"block", func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = &block }, false,
			"volumeMode Block is not supported: " + contract.LegacyProvisionerName + " volumes are directories on the node; use volumeMode: Filesystem"},
		{"selector", func(c *v1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} }, false,
			"spec.selector is not supported: a new hostPath volume has no labels to match it; remove the selector to get a new volume, or create a PersistentVolume yourself for a claim that must select one"},
		{"clone", func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, false, `cloning from PersistentVolumeClaim "src" is not supported: ` + contract.LegacyProvisionerName + ` creates empty directories; create the claim without a data source`},
		{"zero request", func(c *v1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("0")
		}, false,
			"spec.resources.requests.storage must be more than zero: it is the PV's capacity and what is checked against the node's free space"},
		{"name too long with prefix", func(c *v1.PersistentVolumeClaim) { c.Name = long }, true,
			`the volume directory name "` + strings.Repeat("a", 64) + `..." would be 261 bytes, more than the 255 a directory name may have: with USE_NAMING_PREFIX=true the claim name may be at most 214 characters; use a shorter claim name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.UseNamingPrefix = tt.prefix })
			c := claim("c", "wffc", selected(testNode))
			c.UID = "0123456789abcdef0123456789abcdef0123" // 36 bytes, like a real uid
			tt.edit(c)
			pv, state, err := e.p.Provision(context.Background(), provisionOpts(c, e.classes["wffc"]))
			if pv != nil || state != controller.ProvisioningFinished || err == nil || err.Error() != tt.want {
				t.Fatalf("Provision = %v, %v, %v\nwant error %q", pv, state, err, tt.want)
			}
			if got := e.entries(); got != nil {
				t.Errorf("PV_DIR holds %q after a refusal", got)
			}
			if len(e.labeler.paths) != 0 {
				t.Errorf("relabelled %q", e.labeler.paths)
			}
			if got := testutil.ToFloat64(e.p.metrics.provisions.WithLabelValues(ResultRefused)); got != 1 {
				t.Errorf("refused count = %v, want 1", got)
			}
		})
	}
}

func TestProvisionRefusesMoreThanOffered(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Headroom.Percent = 10 }) // 10 GiB of 100 GiB
	e.stats.AvailableBytes = 14 * gi                            // 4 GiB offered
	c := claim("big", "wffc", selected(testNode))
	c.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("5Gi")
	want := "requested 5Gi (5368709120 bytes) is more than the 4.0 GiB node node-a can offer now in " + e.dir +
		" (14.0 GiB available minus 10.0 GiB reserved headroom); free space on the node, request less, or use another node"

	_, state, err := e.p.Provision(context.Background(), provisionOpts(c, e.classes["wffc"]))
	if err == nil || err.Error() != want || state != controller.ProvisioningReschedule {
		t.Fatalf("scheduler-selected claim: Provision = %v, %v\nwant Reschedule, %q", state, err, want)
	}
	pinned := claim("big", "wffc", map[string]string{contract.AnnProvisionOnNode: testNode, contract.AnnSelectedNode: testNode})
	pinned.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("5Gi")
	_, state, err = e.p.Provision(context.Background(), provisionOpts(pinned, e.classes["wffc"]))
	if err == nil || err.Error() != want || state != controller.ProvisioningFinished {
		t.Fatalf("pinned claim: Provision = %v, %v\nwant Finished (rescheduling cannot move it), %q", state, err, want)
	}
	if got := e.entries(); got != nil {
		t.Errorf("PV_DIR holds %q", got)
	}
	if got := testutil.ToFloat64(e.p.metrics.provisions.WithLabelValues(ResultNoSpace)); got != 2 {
		t.Errorf("no_space count = %v, want 2", got)
	}

	// Exactly what is offered fits.
	c.Spec.Resources.Requests[v1.ResourceStorage] = *resource.NewQuantity(4*gi, resource.BinarySI)
	if _, _, err := e.p.Provision(context.Background(), provisionOpts(c, e.classes["wffc"])); err != nil {
		t.Fatalf("request equal to the offer: %v", err)
	}
	// A retry for an existing directory is not counted twice.
	e.stats.AvailableBytes = 10 * gi
	if _, _, err := e.p.Provision(context.Background(), provisionOpts(c, e.classes["wffc"])); err != nil {
		t.Fatalf("retry with the directory already made: %v", err)
	}
}

func TestProvisionStatfsFailure(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Statfs = func(string) (capacity.Stats, error) { return capacity.Stats{}, errors.New("input/output error") }
	})
	_, state, err := e.p.Provision(context.Background(), provisionOpts(claim("c", "wffc", selected(testNode)), e.classes["wffc"]))
	want := "reading free space of " + e.dir + ": input/output error"
	if err == nil || err.Error() != want || state != controller.ProvisioningFinished {
		t.Fatalf("Provision = %v, %v; want %q", state, err, want)
	}
	if got := testutil.ToFloat64(e.p.metrics.provisions.WithLabelValues(ResultFailed)); got != 1 {
		t.Errorf("failed count = %v, want 1", got)
	}
}

func TestProvisionRelabelFailureRemovesDirectory(t *testing.T) {
	e := newEnv(t)
	e.labeler.err = errors.New("operation not supported")
	_, _, err := e.p.Provision(context.Background(), provisionOpts(claim("c", "wffc", selected(testNode)), e.classes["wffc"]))
	want := "setting the SELinux label container_file_t on " + filepath.Join(e.dir, "pvc-uid-c") + ": operation not supported"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if got := e.entries(); got != nil {
		t.Errorf("PV_DIR holds %q after a failed relabel", got)
	}
}

func TestProvisionNodeWithoutHostnameLabel(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Nodes = fakeNodes{testNode: {ObjectMeta: metav1.ObjectMeta{Name: testNode}}}
	})
	_, _, err := e.p.Provision(context.Background(), provisionOpts(claim("c", "wffc", selected(testNode)), e.classes["wffc"]))
	want := `node "node-a" has no kubernetes.io/hostname label, which the PV's node affinity needs (kubelet sets it when the node registers)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if got := e.entries(); got != nil {
		t.Errorf("PV_DIR holds %q", got)
	}
}

func TestProvisionIgnoresClaimOfAnotherNode(t *testing.T) {
	e := newEnv(t)
	_, state, err := e.p.Provision(context.Background(), provisionOpts(claim("c", "wffc", selected("node-b")), e.classes["wffc"]))
	var ignored *controller.IgnoredError
	if !errors.As(err, &ignored) || state != controller.ProvisioningFinished || ignored.Reason != `the scheduler selected node "node-b"` {
		t.Fatalf("Provision = %v, %v; want IgnoredError", state, err)
	}
	if got := e.entries(); got != nil {
		t.Errorf("PV_DIR holds %q", got)
	}
}

func TestProvisionNotesRWXAndMountOptions(t *testing.T) {
	e := newEnv(t)
	sc := e.classes["wffc"].DeepCopy()
	sc.MountOptions = []string{"noatime"}
	c := claim("shared", "wffc", selected(testNode))
	c.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
	pv, _, err := e.p.Provision(context.Background(), provisionOpts(c, sc))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pv.Spec.AccessModes, []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}) || pv.Spec.MountOptions != nil {
		t.Errorf("access modes %v, mount options %v; want [ReadWriteMany], none", pv.Spec.AccessModes, pv.Spec.MountOptions)
	}
	want := []string{
		"PersistentVolumeClaim/shared Normal SingleNodeVolume: ReadWriteMany is honoured on node node-a only: the volume is a directory on that node's disk, so every pod using this claim runs there",
		`PersistentVolumeClaim/shared Warning MountOptionsIgnored: StorageClass "wffc" sets mountOptions ["noatime"], which are not copied to the PV: kubelet refuses to mount a hostPath volume that has mount options`,
	}
	if got := e.events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{PVDir: "relative"})
	want := []string{
		"NodeName: must not be empty",
		`PVDir: "relative" must be an absolute path`,
		"Client: must be set", "Nodes: must be set", "Classes: must be set",
		"Volumes: must be set", "Labeler: must be set", "Statfs: must be set",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("New error %v does not say %q", err, w)
		}
	}
	if _, err := New(Config{NodeName: "n", PVDir: "/"}); err == nil || !strings.Contains(err.Error(), "PVDir: must not be the root directory") {
		t.Errorf("PVDir /: %v", err)
	}
}

var _ Volumes = (*dirvol.Store)(nil)
