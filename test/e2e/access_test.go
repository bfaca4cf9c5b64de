package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Scenario 2a: a non-root pod with an fsGroup writes to a volume whose
// StorageClass sets the directory's owner and mode.
func TestNonRootPodWithFSGroupWrites(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	storageClass(t, env, kit.StorageClass(ns, kit.PoolLocal, func(sc *storagev1.StorageClass) {
		sc.Parameters["directoryUID"] = "1000"
		sc.Parameters["directoryGID"] = "2000"
		sc.Parameters["directoryMode"] = "0770"
	}))
	createPVC(t, env, kit.PVC(ns, "data", ns, "16Mi"))
	pod := kit.OnNode(kit.Pod(ns, "nonroot", "id -u > /data/who && echo written > /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), node)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](2000)}
	createPod(t, env, pod)
	if p, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "nonroot", corev1.PodSucceeded, 2*time.Minute); err != nil {
		logs, _ := kit.PodLogs(ctx, env.C.Client, ns, "nonroot")
		t.Fatalf("%v (log: %q, pod: %v)", err, logs, p != nil)
	}
	pv := boundPV(t, env, ns, "data")
	dir := volumeDir(env.Pools[kit.PoolLocal], pv)
	if got := readFile(t, filepath.Join(dir, "who")); got != "1000\n" {
		t.Errorf("pod ran as %q, want 1000", got)
	}
	st := statT(t, filepath.Join(dir, "file"))
	if st.Uid != 1000 {
		t.Errorf("file written by the pod has uid %d, want 1000", st.Uid)
	}
	dst := statT(t, dir)
	if dst.Uid != 1000 || dst.Gid != 2000 || dst.Mode&0o777 != 0o770 {
		t.Errorf("volume directory uid=%d gid=%d mode=%o, want 1000 2000 770 (StorageClass parameters)", dst.Uid, dst.Gid, dst.Mode&0o777)
	}
}

// Scenario 2b: a read-only mount of the volume cannot be written.
func TestReadOnlyMountRefusesWrites(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	storageClass(t, env, kit.StorageClass(ns, kit.PoolLocal))
	createPVC(t, env, kit.PVC(ns, "data", ns, "16Mi"))
	createPod(t, env, kit.OnNode(kit.Pod(ns, "init", "echo original > /data/file", kit.PodVolume{Name: "v", Claim: "data", Path: "/data"}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "init", corev1.PodSucceeded, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The subshell puts the redirection's own failure into /tmp/err (a
	// shell applies "> /data/file" before any later "2>"), and every line
	// goes to stdout in a fixed order, so the log is deterministic.
	script := `if (echo changed > /data/file) 2>/tmp/err; then echo WROTE; exit 1; fi; echo "error: $(cat /tmp/err)"; echo "content: $(cat /data/file)"`
	createPod(t, env, kit.OnNode(kit.Pod(ns, "ro", script, kit.PodVolume{Name: "v", Claim: "data", Path: "/data", ReadOnly: true}), node))
	_, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "ro", corev1.PodSucceeded, 2*time.Minute)
	logs, _ := kit.PodLogs(ctx, env.C.Client, ns, "ro")
	if err != nil {
		t.Fatalf("%v; log: %q", err, logs)
	}
	lines := strings.Split(strings.TrimSuffix(logs, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "error: ") || !strings.Contains(lines[0], "Read-only file system") || lines[1] != "content: original" {
		t.Errorf("read-only pod log %q: want \"error: ...Read-only file system\" then \"content: original\"", logs)
	}
	pv := boundPV(t, env, ns, "data")
	if got := readFile(t, filepath.Join(volumeDir(env.Pools[kit.PoolLocal], pv), "file")); got != "original\n" {
		t.Errorf("host file %q after the read-only pod, want %q", got, "original\n")
	}
}

// Scenario 2c: an inline ephemeral CSI volume is created with its pod and
// removed with it.
func TestInlineEphemeralVolumeLivesWithPod(t *testing.T) {
	env := needEnv(t)
	ns := namespace(t, env)
	ctx := context.Background()
	node := env.C.RealNode().Name
	csiDir := filepath.Join(env.Pools[kit.PoolFast], "csi")
	before := dirEntries(t, csiDir)
	src := &corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: contract.DriverName, VolumeAttributes: map[string]string{contract.ParamStoragePool: kit.PoolFast}}}
	createPod(t, env, kit.OnNode(kit.Pod(ns, "eph", "echo ephemeral > /scratch/file && sleep 3600", kit.PodVolume{Name: "s", Path: "/scratch", Source: src}), node))
	if _, err := kit.WaitPodPhase(ctx, env.C.Client, ns, "eph", corev1.PodRunning, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	var volDir string
	if err := kit.Poll(ctx, 30*time.Second, "ephemeral volume file on the host", func(context.Context) (bool, string, error) {
		for e := range dirEntries(t, csiDir) {
			if before[e] {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(csiDir, e, "file")); err == nil && string(b) == "ephemeral\n" {
				volDir = filepath.Join(csiDir, e)
				return true, "", nil
			}
		}
		return false, "no new volume directory with the file", nil
	}); err != nil {
		t.Fatal(err)
	}
	deletePodNow(t, env, ns, "eph")
	if err := kit.Poll(ctx, time.Minute, "ephemeral volume directory removed", func(context.Context) (bool, string, error) {
		_, err := os.Stat(volDir)
		return os.IsNotExist(err), "still there", nil
	}); err != nil {
		t.Fatal(err)
	}
}

func statT(t *testing.T, path string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

// dirEntries returns the volume names in a pool's csi directory (none if
// it does not exist yet), leaving out hpp's hidden bookkeeping entries
// (".hpp-*") and lost+found.
func dirEntries(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && e.Name() != "lost+found" {
			out[e.Name()] = true
		}
	}
	return out
}
