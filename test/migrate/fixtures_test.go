package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const (
	pvDir    = "/var/hpvolumes"
	testNode = "node-a"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// migrateBinary builds cmd/hpp-migrate once per test run: the tests run
// the real command, and a failure injection ends the real process.
func migrateBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "hpp-migrate")
		dir, err := os.MkdirTemp("", "hpp-migrate-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "hpp-migrate")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build hpp-migrate: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type runResult struct {
	code           int
	stdout, stderr string
}

// hppMigrate runs the command against the control plane; failAfter sets
// the failure-injection point ("" for none).
func hppMigrate(t testing.TB, cp *controlPlane, failAfter string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(migrateBinary(t), append(args, "--kubeconfig="+cp.kubeconfig)...)
	cmd.Env = append(os.Environ(), "HPP_MIGRATE_FAIL_AFTER="+failAfter)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := runResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run hpp-migrate: %v", err)
	}
	return res
}

func (r runResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout ---\n%s--- stderr ---\n%s", r.code, r.stdout, r.stderr)
}

// setupCluster makes what a cluster with hpp-legacy and hpp-csi has: a
// node (whose hostname label differs from its name, as on some clouds),
// hpp-csi registered on it (CSINode), the legacy StorageClass and a
// namespace.
func setupCluster(t testing.TB, c kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, func() error {
		_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode,
			Labels: map[string]string{corev1.LabelHostname: "host-a", contract.TopologyKey: testNode}}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: testNode},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: contract.DriverName, NodeID: testNode, TopologyKeys: []string{contract.TopologyKey}}}}}, metav1.CreateOptions{})
		return err
	})
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	mustCreate(t, func() error {
		_, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath"},
			Provisioner: contract.LegacyProvisionerName, VolumeBindingMode: &wffc}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
}

func mustCreate(t testing.TB, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// legacyVolume creates a claim (with a label and an owner, as KubeVirt's
// DataVolumes own claims) and the PV hpp-legacy would provision for it,
// pre-bound to the claim's UID as the provisioning library does, and waits
// until the PV controller has bound them.
func legacyVolume(t testing.TB, c kubernetes.Interface, ns, claimName, pvName string, prefixed bool) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner-" + claimName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc := "hostpath"
	claim, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: map[string]string{"app": "vm"},
			Annotations:     map[string]string{contract.AnnProvisionOnNode: testNode},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().PersistentVolumes().Create(ctx, legacyPVObject(ns, claim, pvName, prefixed), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return claim
}

// waitBound waits (bounded, not asserted on time) until every claim in ns
// is Bound.
func waitBound(t testing.TB, c kubernetes.Interface, ns string, n int) {
	t.Helper()
	waitBoundWithin(t, c, ns, n, 2*time.Minute)
}

// waitBoundWithin is waitBound with a bound of its own, for the benchmark's
// thousand claims.
func waitBoundWithin(t testing.TB, c kubernetes.Interface, ns string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		list, err := c.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := 0
		for _, cl := range list.Items {
			if cl.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		if bound == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d claims Bound after %s", bound, n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// phaseRecorder watches the claims of a namespace and records every phase
// other than Bound that any of them is seen in.
type phaseRecorder struct {
	mu     sync.Mutex
	seen   []string
	cancel func()
}

func recordPhases(t testing.TB, c kubernetes.Interface, ns string) *phaseRecorder {
	t.Helper()
	list, err := c.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &phaseRecorder{cancel: func() { cancel(); rw.Stop() }}
	go func() {
		for ev := range rw.ResultChan() {
			claim, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				r.add(fmt.Sprintf("claim %s deleted", claim.Name))
			} else if claim.Status.Phase != corev1.ClaimBound {
				r.add(fmt.Sprintf("claim %s %s (rv %s)", claim.Name, claim.Status.Phase, claim.ResourceVersion))
			}
		}
	}()
	t.Cleanup(r.cancel)
	return r
}

func (r *phaseRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

func (r *phaseRecorder) notBound() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// legacyPVObject is the PV hpp-legacy provisions for claim: pre-bound to
// the claim's UID (as the provisioning library does), hostPath in PV_DIR,
// node affinity on the node's hostname label, the legacy annotations.
func legacyPVObject(ns string, claim *corev1.PersistentVolumeClaim, pvName string, prefixed bool) *corev1.PersistentVolume {
	dir := pvName
	if prefixed {
		dir = claim.Name + "-" + pvName
	}
	fs := corev1.PersistentVolumeFilesystem
	hpt := corev1.HostPathDirectory
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{"tier": "gold"}, Annotations: map[string]string{
			contract.AnnIdentity: contract.LegacyProvisionerName, contract.AnnProvisionOnNode: testNode,
			contract.AnnProvisionedBy: contract.LegacyProvisionerName,
		}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              *claim.Spec.StorageClassName,
			VolumeMode:                    &fs,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: pvDir + "/" + dir, Type: &hpt}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"host-a"}}},
			}}}},
		},
	}
}
