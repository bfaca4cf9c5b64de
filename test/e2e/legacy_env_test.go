package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// commandBin is one of hpp's commands, found or built once per test run.
type commandBin struct {
	name string
	once sync.Once
	path string
	err  error
}

var (
	legacyBin  = &commandBin{name: "hpp-legacy"}
	migrateBin = &commandBin{name: "hpp-migrate"}
)

// get returns $HPP_BIN_DIR/<name>, or builds cmd/<name>.
func (b *commandBin) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		if dir := os.Getenv("HPP_BIN_DIR"); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, b.name)); err == nil {
				b.path = filepath.Join(dir, b.name)
				return
			}
		}
		b.path = filepath.Join(os.TempDir(), fmt.Sprintf("%s-e2e-%d", b.name, os.Getpid()))
		b.err = kit.BuildCommand(context.Background(), b.name, b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func legacyBinary(t *testing.T) string { return legacyBin.get(t) }

// legacyNode is one node running hpp-legacy with its own PV_DIR.
type legacyNode struct {
	node  *cluster.Node
	proc  *cluster.Process
	pvDir string
	url   string // http://127.0.0.1:<port>, serving /metrics and /healthz
}

type legacyOptions struct {
	// env is added to the process's environment, e.g. USE_NAMING_PREFIX.
	env []string
	// pvDir replaces the test's own PV_DIR, e.g. with a pool's legacyPath.
	pvDir string
}

// startLegacy runs hpp-legacy on node for this test (PV_DIR in the node's
// directory, named after the test) and waits until /healthz passes. The
// cleanup stops it with SIGTERM and checks it exits cleanly.
func startLegacy(t *testing.T, env *kit.Env, node *cluster.Node, opts legacyOptions) *legacyNode {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	l := &legacyNode{
		node:  node,
		pvDir: filepath.Join(node.Dir(), "legacy", strings.ReplaceAll(t.Name(), "/", "_")),
		url:   fmt.Sprintf("http://127.0.0.1:%d", port),
	}
	if opts.pvDir != "" {
		l.pvDir = opts.pvDir
	}
	l.proc, err = node.StartProcess(cluster.ProcessSpec{
		Name: "hpp-legacy", Path: legacyBinary(t),
		Args: []string{"--http-address", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "debug", "--log-format", "text"},
		Env:  append([]string{"PV_DIR=" + l.pvDir}, opts.env...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.node.Simulated && env.C.Node(l.node.Name) == nil {
			return // removed with its node
		}
		if err := l.node.StopProcess(context.Background(), "hpp-legacy"); err != nil {
			t.Errorf("stop hpp-legacy on %s: %v", l.node.Name, err)
		}
		if err := l.proc.ExitError(); err != nil {
			t.Errorf("hpp-legacy on %s did not exit cleanly on SIGTERM: %v\n%s", l.node.Name, err, l.proc.Tail(20))
		}
	})
	err = kit.Poll(context.Background(), time.Minute, "hpp-legacy healthy on "+node.Name, func(ctx context.Context) (bool, string, error) {
		select {
		case <-l.proc.Exited():
			return false, "", fmt.Errorf("hpp-legacy on %s exited: %w\n%s", node.Name, l.proc.ExitError(), l.proc.Tail(20))
		default:
		}
		code, body, err := httpGet(ctx, l.url+"/healthz")
		if err != nil {
			return false, "", kit.Retry(err)
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// addLegacySimNode adds a simulated node running hpp-legacy; the cleanup
// removes the node.
func addLegacySimNode(t *testing.T, env *kit.Env, name string, opts legacyOptions) *legacyNode {
	t.Helper()
	n, err := env.C.AddSimulatedNode(context.Background(), name, cluster.SimulatedNodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.C.RemoveSimulatedNode(context.Background(), name); err != nil {
			t.Error(err)
		}
	})
	return startLegacy(t, env, n, opts)
}

// volumes lists the volume directories in PV_DIR (not hpp's hidden areas).
func (l *legacyNode) volumes(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(l.pvDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			names = append(names, de.Name())
		}
	}
	sort.Strings(names)
	return names
}

// metric returns the value of one sample line of /metrics, e.g.
// `hpp_legacy_provision_total{result="provisioned"}`, or "" if absent.
func (l *legacyNode) metric(t *testing.T, sample string) string {
	t.Helper()
	_, body, err := httpGet(context.Background(), l.url+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// waitLog waits until hpp-legacy's log has a line containing every part:
// the point where the process has looked at an object, for scenarios that
// prove it then did nothing.
func (l *legacyNode) waitLog(t *testing.T, what string, parts ...string) {
	t.Helper()
	waitProcessLog(t, l.proc, what, parts...)
}

// waitProcessLog waits until a process's log has a line containing every
// part.
func waitProcessLog(t *testing.T, proc *cluster.Process, what string, parts ...string) {
	t.Helper()
	err := kit.Poll(context.Background(), 2*time.Minute, what+" in the log of "+proc.Name(), func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(proc.LogPath())
		if err != nil {
			return false, "", kit.Retry(err)
		}
	lines:
		for _, line := range strings.Split(string(b), "\n") {
			for _, p := range parts {
				if !strings.Contains(line, p) {
					continue lines
				}
			}
			return true, "", nil
		}
		return false, "not logged yet", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// legacyClass is a StorageClass of the legacy provisioner: WaitForFirstConsumer
// and Delete unless changed by the options (Retain, Immediate).
func legacyClass(name string, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       contract.LegacyProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	for _, o := range opts {
		o(sc)
	}
	return sc
}

// pinnedPVC is a claim with kubevirt.io/provisionOnNode.
func pinnedPVC(ns, name, class, size, node string) *corev1.PersistentVolumeClaim {
	pvc := kit.PVC(ns, name, class, size)
	pvc.Annotations = map[string]string{contract.AnnProvisionOnNode: node}
	return pvc
}

// waitEvent waits for an event of reason about an object and returns it.
func waitEvent(t *testing.T, env *kit.Env, ns, kind, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := kit.Poll(context.Background(), 2*time.Minute, fmt.Sprintf("event %s on %s %s/%s", reason, kind, ns, name), func(ctx context.Context) (bool, string, error) {
		list, err := env.C.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", kit.Retry(err)
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason {
				found = e
				return true, "", nil
			}
		}
		return false, kit.Events(ctx, env.C.Client, ns, kind, name), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func freePort() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
