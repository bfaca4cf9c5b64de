package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// killedChildEnv makes TestKilledHarnessLeavesNothingStuck's child start a
// cluster with a running pod, print the cluster directory and wait to be
// killed.
const killedChildEnv = "HPP_CLUSTER_KILLED_CHILD"

// A harness killed with SIGKILL gets no chance to tear down. Its node
// goes with it (node-init dies of Pdeathsig, and with the PID 1 of the
// node's namespace every process in it: kubelet, containerd, the shims and
// the containers), and the next Start sweeps what it left on the host.
func TestKilledHarnessLeavesNothingStuck(t *testing.T) {
	bins := requireClusterTier(t)
	if os.Getenv(killedChildEnv) != "" {
		runKilledChild(t, bins)
		return
	}
	// No deadline until the lock is ours: the child's wait for it depends
	// on other runs on this machine (go test's -timeout bounds it all).
	child := exec.Command(os.Args[0], "-test.run=^TestKilledHarnessLeavesNothingStuck$", "-test.v")
	child.Env = append(os.Environ(), killedChildEnv+"=1")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dir, podPIDs, err := readChild(out)
	if err != nil {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("killed-harness child: %v", err)
	}
	// Other clusters on this machine wait for the lock too; a blocked
	// flock wakes as the child dies, before their next poll, so no other
	// run sweeps the killed cluster before this test looks at it.
	lock, err := waitLockInBackground()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	t.Logf("harness of %s killed with SIGKILL", dir)
	held := <-lock
	if held.err != nil {
		t.Fatal(held.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Pdeathsig and the namespace's end are asynchronous: wait for them.
	err = poll(ctx, time.Minute, 200*time.Millisecond, "the killed cluster's processes gone", func(context.Context) (bool, error) {
		return len(processesMentioning(dir)) == 0 && len(alive(podPIDs)) == 0, nil
	})
	if err != nil {
		t.Fatalf("%v: left %v and the pod's %v", err, processesMentioning(dir), alive(podPIDs))
	}
	// What the harness mounted on the host stays for the next Start; none
	// of the node's own mounts (/proc, /var/lib/kubelet, root filesystems)
	// ever reached the host.
	mps, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) != 1 || mps[0] != dir {
		t.Errorf("host mounts under the killed cluster's directory: %v, want only %s itself", mps, dir)
	}
	if mps, _ := mountsUnder("/var/lib/kubelet"); len(mps) > 0 {
		t.Errorf("host mounts under /var/lib/kubelet: %v", mps)
	}

	c, err := startLocked(ctx, Options{Binaries: bins, Logf: t.Logf}.withDefaults(), held.lock)
	if err != nil {
		t.Fatalf("start after a killed harness: %v", err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("killed cluster's directory %s still there after the next Start: %v", dir, err)
	}
}

// runKilledChild is the child: a cluster with one running pod, then the
// directory on stdout, then nothing until SIGKILL.
func runKilledChild(t *testing.T, bins Binaries) {
	ctx := context.Background()
	c, err := Start(ctx, Options{Binaries: bins, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "c", Image: BusyboxImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = poll(ctx, 2*time.Minute, 250*time.Millisecond, "pod sleeper Running", func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pod's processes (in kubelet's cgroups) by host pid: another
	// cluster may start once this one's machine lock is gone.
	fmt.Printf("pod-pids=%s\ncluster-dir=%s\n", strings.Join(kubepodsProcesses(), " "), c.Dir)
	select {}
}

// readChild reads the child's stdout up to its cluster-dir line.
func readChild(out io.Reader) (dir string, podPIDs []string, err error) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if pids, ok := strings.CutPrefix(sc.Text(), "pod-pids="); ok {
			podPIDs = strings.Fields(pids)
		}
		if dir, ok := strings.CutPrefix(sc.Text(), "cluster-dir="); ok {
			if len(podPIDs) == 0 {
				return "", nil, errors.New("no process in kubelet's cgroups while its pod runs")
			}
			return dir, podPIDs, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", nil, fmt.Errorf("reading its output: %w", err)
	}
	return "", nil, errors.New("exited without a cluster directory")
}

type heldLock struct {
	lock *machineLock
	err  error
}

// waitLockInBackground takes the machine lock with a blocking flock in a
// goroutine; the result arrives on the channel once the holder is gone.
func waitLockInBackground() (<-chan heldLock, error) {
	f, err := os.OpenFile(machineLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	ch := make(chan heldLock, 1)
	go func() {
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			_ = f.Close()
			ch <- heldLock{err: fmt.Errorf("machine lock %s: %w", machineLockPath, err)}
			return
		}
		ch <- heldLock{lock: &machineLock{f: f}}
	}()
	return ch, nil
}

// alive returns the pids that still exist.
func alive(pids []string) []string {
	var out []string
	for _, pid := range pids {
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// kubepodsProcesses lists the pids in kubelet's cgroups: containers.
func kubepodsProcesses() []string {
	var pids []string
	for _, d := range kubepodsCgroups() {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err == nil {
			pids = append(pids, strings.Fields(string(data))...)
		}
	}
	return pids
}
