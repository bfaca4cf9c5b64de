package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// cutNode cuts the real node off from the API server for d: kubelet and the
// node's own processes (hpp-csi, csi-provisioner, csi-snapshotter) lose
// every packet they exchange with kube-apiserver's port, while the control
// plane (controller-manager, scheduler, the controller-only endpoint and
// its sidecars) and the test's client keep talking to it, as when a node's
// link to the control plane goes down.
//
// The harness shares this machine's network namespace, so the cut matches
// processes, not addresses, in two ways (nodeCut): connections the node's
// processes already have are cut by their local port, both directions;
// new ones cannot be made, since the processes are moved into a cgroup v2
// group whose packets to the API port one rule drops (a socket keeps the
// cgroup it was made in, which is why the open ones need their own rules).
// Nothing is reset: the clients find out by their own timeouts, as on a
// real cut. Every second the cut catches up with processes the harness
// restarted (another fault may kill them) and the connections they made.
// At the end the rules go first, then the processes return to the root
// group; a cut that dropped no packet fails the run.
func (r *run) cutNode(ctx context.Context, d time.Duration) error {
	port, err := apiPort(r.env.C.ServerURL())
	if err != nil {
		return err
	}
	root, err := cgroup2Root()
	if err != nil {
		return err
	}
	// A name of its own per cut: two cuts may overlap, and the first to
	// end must not remove the other's group or count its drops.
	c := &nodeCut{name: fmt.Sprintf("hpp-chaos-cut-%d-%d", os.Getpid(), cutSeq.Add(1)), port: port, root: root,
		procs: r.nodeProcesses(), cut: map[string]bool{}}
	c.group = filepath.Join(root, c.name)
	if err := os.Mkdir(c.group, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cut the node off: %w", err)
	}
	err = c.begin(ctx)
	if err == nil {
		end := time.After(d)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-ctx.Done():
				break wait
			case <-end:
				break wait
			case <-tick.C:
				if err = c.catchUp(ctx); err != nil {
					break wait
				}
			}
		}
	}
	// A cut that dropped nothing proved nothing: the processes or the
	// port were not the ones talking to the API server.
	dropped, countErr := kit.DroppedPackets(context.Background(), c.name)
	if countErr == nil && dropped == 0 && err == nil {
		countErr = fmt.Errorf("cut the node off: the rules dropped no packet in %v", d)
	}
	r.note("cut: %d packets between the node and the API server dropped", dropped)
	r.t.Logf("the node's cut from the API server dropped %d packets in %v (%d connections cut)", dropped, d, len(c.cut))
	// The rules go whatever happened: a cut left behind would fail every
	// check after it for a reason that is the harness's, not hpp's.
	return errors.Join(err, countErr, c.end())
}

// cutSeq numbers the cuts of this process.
var cutSeq atomic.Int64

// nodeCut is one cut in progress: its rules (each with the comment name,
// by which they are counted) and the connections it cut.
type nodeCut struct {
	name, port  string
	root, group string
	procs       []*cluster.Process
	rules       [][]string
	cut         map[string]bool // local ports of the connections cut
}

// begin moves the processes into the group and adds the group's rule.
func (c *nodeCut) begin(ctx context.Context) error {
	if err := moveInto(c.group, c.procs); err != nil {
		return err
	}
	if err := c.add(ctx, "-m", "cgroup", "--path", c.name, "-p", "tcp", "--dport", c.port); err != nil {
		return err
	}
	return c.catchUp(ctx)
}

// catchUp moves restarted processes into the group and cuts the
// connections to the API server that the node's processes hold.
func (c *nodeCut) catchUp(ctx context.Context) error {
	if err := moveInto(c.group, c.procs); err != nil {
		return err
	}
	pids := map[int]bool{}
	for _, p := range c.procs {
		if p != nil && p.Pid() != 0 {
			pids[p.Pid()] = true
		}
	}
	ports, err := connectionsTo(ctx, c.port, pids)
	if err != nil {
		return err
	}
	for _, local := range ports {
		if c.cut[local] {
			continue
		}
		c.cut[local] = true
		if err := c.add(ctx, "-p", "tcp", "--sport", local, "--dport", c.port); err != nil {
			return err
		}
		if err := c.add(ctx, "-p", "tcp", "--sport", c.port, "--dport", local); err != nil {
			return err
		}
	}
	return nil
}

// add inserts a DROP rule into OUTPUT (loopback traffic passes there in
// both directions) with the cut's comment.
func (c *nodeCut) add(ctx context.Context, match ...string) error {
	rule := append(append([]string{"OUTPUT"}, match...), "-m", "comment", "--comment", c.name, "-j", "DROP")
	if _, err := kit.IPTables(ctx, append([]string{"-I"}, rule...)...); err != nil {
		return err
	}
	c.rules = append(c.rules, rule)
	return nil
}

// end removes the rules, returns the processes to the root group and
// removes the group.
func (c *nodeCut) end() error {
	var errs []error
	for _, rule := range c.rules {
		if _, err := kit.IPTables(context.Background(), append([]string{"-D"}, rule...)...); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, moveInto(c.root, c.procs))
	if err := os.Remove(c.group); err != nil {
		errs = append(errs, fmt.Errorf("remove the cut's cgroup %s: %w", c.group, err))
	}
	return errors.Join(errs...)
}

// connectionsTo lists the local ports of the established TCP connections
// to port held by one of pids (ss -p names each socket's processes).
func connectionsTo(ctx context.Context, port string, pids map[int]bool) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := testutil.Run(ctx, "ss", "-tnpH", "state", "established", "dport", "=", ":"+port)
	if err != nil {
		return nil, err
	}
	var ports []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		ours := false
		for _, m := range ssPid.FindAllStringSubmatch(f[4], -1) {
			if pid, err := strconv.Atoi(m[1]); err == nil && pids[pid] {
				ours = true
			}
		}
		if i := strings.LastIndex(f[2], ":"); ours && i >= 0 {
			ports = append(ports, f[2][i+1:])
		}
	}
	return ports, nil
}

// ssPid finds the process ids in ss's users:(("name",pid=N,fd=M),...).
var ssPid = regexp.MustCompile(`pid=(\d+)`)

// nodeProcesses are the processes of the real node that talk to the API
// server: kubelet and what the node runs beside the pods.
func (r *run) nodeProcesses() []*cluster.Process {
	procs := []*cluster.Process{r.env.C.Process("kubelet")}
	return append(procs, r.env.C.RealNode().Processes()...)
}

// moveInto writes the current pid of each running process into the cgroup
// directory group's cgroup.procs (a process's children follow it only when
// started after the move; these processes start none that talk to the API
// server). A process that exited since Pid (ESRCH) is moved when it is back.
func moveInto(group string, procs []*cluster.Process) error {
	var errs []error
	for _, p := range procs {
		if p == nil {
			continue
		}
		pid := p.Pid()
		if pid == 0 {
			continue // down (killed by another fault): moved when it is back
		}
		err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("move %s (pid %d) into cgroup %s: %w", p.Name(), pid, group, err))
		}
	}
	return errors.Join(errs...)
}

// apiPort is the port of the API server's URL.
func apiPort(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Port() == "" {
		return "", fmt.Errorf("cut the node off: the API server's URL %q names no port", server)
	}
	return u.Port(), nil
}

// cgroup2Root is where the cgroup v2 hierarchy is mounted (on this machine
// /sys/fs/cgroup/unified, beside the v1 controllers), from /proc/mounts.
func cgroup2Root() (string, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 3 && fields[2] == "cgroup2" {
			return fields[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("cut the node off: no cgroup2 hierarchy mounted (the iptables cgroup match needs one)")
}
