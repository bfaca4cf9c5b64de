package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The real node's containerd and kubelet run in a PID and mount namespace
// of their own, "the node", whose PID 1 is the harness's init process
// (node-init). Two things need it:
//
//   - Tools that reach "the host" from a privileged pod do it as on any
//     node, with `nsenter --mount=/rootfs/proc/1/ns/mnt` (/rootfs being a
//     hostPath volume of /): the e2e suite's host-exec pods do. On these
//     machines the host's own PID 1 is the VM sandbox's init, which no
//     process may inspect (Permission denied even for root), so that
//     path only works when /proc, as containerd sees it, belongs to a PID
//     namespace whose PID 1 is ours and lives in the node's mount
//     namespace.
//   - The same tools hard-code kubelet's default root, /var/lib/kubelet.
//     kubelet keeps the cluster's own root (--root-dir under Dir, so
//     parallel checkouts never share state and hpp-csi's socket paths do
//     not change), and the node's mount namespace shows that directory at
//     /var/lib/kubelet too, with a bind mount nobody outside the node sees.
//
// Mount propagation: the cluster directory is an rshared mount on the host
// (mounted before the node exists) and an rslave one in the node, shared
// again inside it. So every mount made on the host under the cluster
// directory — hpp-csi's publish bind mounts (hpp-csi runs on the host),
// tmpfs and XFS pools a test adds later — reaches kubelet and the
// containers, as on a real node with one mount namespace, while what the
// node mounts (/proc, /var/lib/kubelet, container root filesystems,
// kubelet's tmpfs volumes, mounts of a node plugin in a pod with
// Bidirectional propagation) never reaches the host: nothing the node does
// can leak onto this machine, and all of it goes away with the namespace.
//
// Crash safety: node-init has Pdeathsig, and when the PID 1 of a namespace
// dies the kernel kills every process in it; a mount namespace with no
// process left is freed with all its mounts. A killed harness therefore
// leaves only what it mounted on the host under its directory, which the
// next Start sweeps (sweepStale), as before.

// nodeInitScript runs as PID 1 of the new namespaces, then becomes the
// pause binary, which reaps orphans (containerd's shims re-parent to it)
// and exits on SIGTERM, taking the node with it. $1 is the cluster
// directory, $2 kubelet's root, $3 the pause binary.
const nodeInitScript = `set -eu
mount --make-rslave /
mount --make-shared "$1"
mount -t proc proc /proc
mkdir -p /var/lib/kubelet
mount --bind "$2" /var/lib/kubelet
exec "$3"`

// nodeEnterScript runs a program inside the node's namespaces. nsenter
// must fork to enter a PID namespace and then waits for its child without
// forwarding signals, while the harness stops a process with SIGTERM to
// its process group: nsenter would die at once and the harness would stop
// waiting while the program still shuts down. With SIGTERM ignored
// (inherited across exec), nsenter outlives its child and exits with its
// status; containerd and kubelet are Go programs, which install their own
// SIGTERM handler whatever they inherit, so they still stop in order.
// SIGKILL (Process.Kill) ends both. $0 is node-init's pid, $1 the working
// directory.
const nodeEnterScript = `pid=$0 wd=$1
shift
trap '' TERM
exec nsenter --target="$pid" --pid --mount --wd="$wd" -- "$@"`

// nodeKubeletRoot is where the node's mount namespace shows kubelet's
// root directory (nodeInitScript's bind mount).
const nodeKubeletRoot = "/var/lib/kubelet"

// nodeInitName is node-init's process name (and log file).
const nodeInitName = "node-init"

// startNodeNamespace starts node-init in new PID and mount namespaces and
// waits until it has set the namespace up and runs the pause binary.
func (c *Cluster) startNodeNamespace(ctx context.Context, pause string) error {
	for _, tool := range []string{"mount", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return &StepError{Step: "start the node namespace", Err: fmt.Errorf("%s (util-linux) is needed: %w", tool, err)}
		}
	}
	if err := os.MkdirAll(c.kubeletDir(), 0o750); err != nil {
		return &StepError{Step: "start the node namespace", Err: err}
	}
	proc, err := c.run(ProcessSpec{
		Name: nodeInitName, Path: "/bin/sh",
		Args:       []string{"-c", nodeInitScript, "hpp-node-init", c.Dir, c.kubeletDir(), pause},
		cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
	})
	if err != nil {
		return &StepError{Step: "start the node namespace", Err: err}
	}
	if err := poll(ctx, startTimeout, 50*time.Millisecond, "node namespace set up", func(context.Context) (bool, error) {
		if !proc.Running() {
			return false, fmt.Errorf("%s exited: %w", nodeInitName, proc.ExitError())
		}
		exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(proc.Pid()), "exe"))
		return err == nil && exe == pause, nil
	}); err != nil {
		return c.stepError("set up the node namespace", nodeInitName, err)
	}
	c.opts.Logf("node namespace ready (init pid %d on the host)", proc.Pid())
	return nil
}

// runInNode starts a real-node daemon inside the node's namespaces.
func (c *Cluster) runInNode(spec ProcessSpec) (*Process, error) {
	init := c.Process(nodeInitName)
	if init == nil {
		return nil, fmt.Errorf("process %s: the node namespace was not started", spec.Name)
	}
	spec.inNode = init
	return c.run(spec)
}

// nodeCommand is the command line that runs path with args inside the
// namespaces of the node whose init has host pid initPID.
func nodeCommand(initPID int, wd, path string, args []string) (string, []string) {
	return "/bin/sh", append([]string{"-c", nodeEnterScript, strconv.Itoa(initPID), wd, path}, args...)
}

// NodeInitPID is the host pid of the real node's PID 1, for
// `nsenter --target=<pid> --mount` into the node's mount namespace (where
// /var/lib/kubelet is kubelet's root and /proc is the node's); 0 when
// the node is not running.
func (c *Cluster) NodeInitPID() int {
	if p := c.Process(nodeInitName); p != nil {
		return p.Pid()
	}
	return 0
}
