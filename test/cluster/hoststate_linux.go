package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// staleDirPrefix names every cluster directory, so a later run can find
// and sweep what a killed one left (it holds the machine lock, so nothing
// else with this prefix is alive).
const staleDirPrefix = "hppc-"

// hostState is what existed before the cluster started, so teardown only
// removes what the cluster added.
type hostState struct {
	chains        map[string]bool // "iptables/filter/KUBE-FIREWALL"
	cgroupsBefore map[string]bool // kubepods cgroup directories that existed
	fixedBefore   map[string]bool // fixedPaths that existed
}

// fixedPaths are the directories kubelet and containerd's shims create
// whatever they are configured with: kubelet's device-plugin socket
// directory and the shims' socket directory.
func fixedPaths() []string { return []string{"/var/lib/kubelet", "/run/containerd"} }

// removeFixedPaths removes the fixedPaths the cluster created (those that
// did not exist before it started), once nothing is mounted in them.
func removeFixedPaths(before hostState) error {
	var errs []error
	for _, p := range fixedPaths() {
		if before.fixedBefore[p] {
			continue
		}
		if mps, _ := mountsUnder(p); len(mps) > 0 {
			errs = append(errs, fmt.Errorf("%s: still mounted %v", p, mps))
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// iptablesTables are the tables kubelet and CNI plugins add chains to.
func iptablesTables() []string { return []string{"filter", "nat", "mangle"} }

func snapshotHostState(ctx context.Context, cmd Commander) hostState {
	st := hostState{chains: map[string]bool{}, cgroupsBefore: map[string]bool{}, fixedBefore: map[string]bool{}}
	for _, p := range fixedPaths() {
		if _, err := os.Stat(p); err == nil {
			st.fixedBefore[p] = true
		}
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables() {
			for _, chain := range listChains(ctx, cmd, bin, table) {
				st.chains[bin+"/"+table+"/"+chain] = true
			}
		}
	}
	for _, d := range kubepodsCgroups() {
		st.cgroupsBefore[d] = true
	}
	return st
}

// listChains returns the chain names of one table (none when the tool or
// table is missing).
func listChains(ctx context.Context, cmd Commander, bin, table string) []string {
	out, err := cmd.Run(ctx, bin+"-save", "-t", table)
	if err != nil {
		return nil
	}
	var chains []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, ":") {
			if f := strings.Fields(line[1:]); len(f) > 0 {
				chains = append(chains, f[0])
			}
		}
	}
	return chains
}

// removeChains deletes the KUBE-* and CNI-* chains that were not there
// before, with the rules that jump to them, in one iptables-restore
// transaction per table.
func removeChains(ctx context.Context, cmd Commander, before hostState) error {
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables() {
			out, err := cmd.Run(ctx, bin+"-save", "-t", table)
			if err != nil {
				continue
			}
			var doomed []string
			for _, chain := range listChains(ctx, cmd, bin, table) {
				if (strings.HasPrefix(chain, "KUBE-") || strings.HasPrefix(chain, "CNI-")) && !before.chains[bin+"/"+table+"/"+chain] {
					doomed = append(doomed, chain)
				}
			}
			if len(doomed) == 0 {
				continue
			}
			script := restoreScript(table, out, doomed)
			if _, err := cmd.RunInput(ctx, script, bin+"-restore", "--noflush"); err != nil {
				errs = append(errs, fmt.Errorf("remove %s %s chains %v: %w", bin, table, doomed, err))
			}
		}
	}
	return errors.Join(errs...)
}

// restoreScript deletes every rule that jumps to a doomed chain from a
// chain that stays, then flushes and deletes the doomed chains.
func restoreScript(table, save string, doomed []string) string {
	isDoomed := map[string]bool{}
	for _, c := range doomed {
		isDoomed[c] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, line := range strings.Split(save, "\n") {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || isDoomed[f[1]] {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if (f[i] == "-j" || f[i] == "-g") && isDoomed[f[i+1]] {
				fmt.Fprintf(&b, "-D%s\n", strings.TrimPrefix(line, "-A"))
				break
			}
		}
	}
	for _, c := range doomed {
		fmt.Fprintf(&b, "-F %s\n", c)
	}
	for _, c := range doomed {
		fmt.Fprintf(&b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// makeSharedMount bind-mounts dir onto itself and makes it rshared.
func makeSharedMount(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s rshared: %w", dir, err)
	}
	return nil
}

// mountsUnder returns the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := csitest.Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unmountAll detaches every mount at or below dir, repeating for stacked
// mounts, and reports those that stay.
func unmountAll(dir string) error {
	for range 10 {
		mps, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
		}
	}
	mps, _ := mountsUnder(dir)
	if len(mps) > 0 {
		return fmt.Errorf("mounts still under %s: %v", dir, mps)
	}
	return nil
}

// detachLoops detaches loop devices whose backing file is under dir.
func detachLoops(ctx context.Context, cmd Commander, dir string) error {
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var errs []error
	for _, f := range backing {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		file := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		if file == dir || strings.HasPrefix(file, dir+"/") {
			dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
			if _, err := cmd.Run(ctx, "losetup", "-d", dev); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// killProcessesMentioning SIGKILLs every process (not this one) whose
// command line or executable mentions dir: containerd's shims, which
// outlive containerd, and anything a killed run left. Returns what it killed.
func killProcessesMentioning(dir string) []string {
	var killed []string
	for _, p := range processesMentioning(dir) {
		if syscall.Kill(p.pid, syscall.SIGKILL) == nil {
			killed = append(killed, p.String())
		}
	}
	return killed
}

// hostProcess is a process seen in /proc.
type hostProcess struct {
	pid     int
	cmdline string
}

func (p hostProcess) String() string { return fmt.Sprintf("%d %s", p.pid, p.cmdline) }

// processesMentioning lists every process (not this one) whose command
// line or executable mentions dir.
func processesMentioning(dir string) []hostProcess {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var found []hostProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		line := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		if strings.Contains(line, dir) || strings.HasPrefix(exe, dir+"/") {
			found = append(found, hostProcess{pid: pid, cmdline: line})
		}
	}
	return found
}

// kubepodsCgroups lists kubelet's cgroup directories (cgroup v1, one tree
// per controller), deepest first.
func kubepodsCgroups() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.SliceStable(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// removeKubepodsCgroups kills what is left in kubelet's cgroups that the
// cluster created and removes them.
func removeKubepodsCgroups(before hostState) {
	dirs := kubepodsCgroups()
	for _, d := range dirs {
		if before.cgroupsBefore[d] {
			continue
		}
		if data, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	for _, d := range dirs {
		if !before.cgroupsBefore[d] {
			_ = unix.Rmdir(d)
		}
	}
}

// deleteLink removes a network interface if it exists.
func deleteLink(ctx context.Context, cmd Commander, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := cmd.Run(ctx, "ip", "link", "del", name)
	return err
}

// sweepStale removes what a killed earlier run left: its processes,
// mounts, loop devices and directory, and the CNI bridge. Its node's
// namespaces are already gone (node-init dies with the harness, and the
// node with it); what it mounted on the host under its directory is not.
func sweepStale(ctx context.Context, cmd Commander, opts Options, logf func(string, ...any)) error {
	base := opts.BaseDir
	if base == "" {
		base = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(base, staleDirPrefix+"*"))
	var errs []error
	for _, dir := range dirs {
		logf("removing what an earlier run left in %s", dir)
		for _, k := range killProcessesMentioning(dir) {
			logf("killed stale process %s", k)
		}
		if err := unmountAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := detachLoops(ctx, cmd, dir); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	// Under the machine lock, every kubelet cgroup and KUBE-/CNI- chain on
	// this machine is a killed run's.
	removeKubepodsCgroups(hostState{cgroupsBefore: map[string]bool{}})
	if err := removeChains(ctx, cmd, hostState{chains: map[string]bool{}}); err != nil {
		errs = append(errs, err)
	}
	if err := deleteLink(ctx, cmd, opts.Bridge); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MountTmpfs mounts a tmpfs of sizeBytes at dir (created if missing): a
// size-limited pool for capacity tests. The mount must be inside the
// cluster directory (e.g. under a Node's Dir) so Stop removes it.
func MountTmpfs(dir string, sizeBytes int64) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("tmpfs dir %q: must be absolute", dir)
	}
	if sizeBytes < 4096 {
		return fmt.Errorf("tmpfs size %d: must be at least 4096 bytes", sizeBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tmpfs dir: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(sizeBytes, 10)+",mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs of %d bytes on %s: %w", sizeBytes, dir, err)
	}
	return nil
}

// MountQuotaFS makes a filesystem of fsType ("xfs" or "ext4") and
// sizeBytes in the sparse file dir+".img", mounts it at dir (created if
// missing) through a loop device with project quotas enforced
// (prjquota; ext4 made with the features project,quota), as an enforcing
// pool needs, and returns what mkfs or the kernel refused otherwise (a
// kernel without CONFIG_XFS_QUOTA for XFS, without CONFIG_QFMT_V2 for
// ext4). Like MountTmpfs, dir must be inside the cluster directory: Stop
// unmounts it and detaches the loop device.
func MountQuotaFS(ctx context.Context, dir, fsType string, sizeBytes int64) error {
	var mkfs []string
	var needs string
	switch fsType {
	case "xfs":
		mkfs, needs = []string{"mkfs.xfs", "-q"}, "CONFIG_XFS_QUOTA"
	case "ext4":
		// -F: the image is a regular file, not a block device.
		mkfs, needs = []string{"mkfs.ext4", "-q", "-F", "-O", "project,quota"}, "CONFIG_QUOTA and CONFIG_QFMT_V2"
	default:
		return fmt.Errorf("quota pool filesystem %q: must be xfs or ext4", fsType)
	}
	return mountLoopFS(ctx, dir, fsType, mkfs, "loop,prjquota", needs, sizeBytes)
}

// MountReflinkXFS makes XFS with reflink (as hpp-mounter makes of a disk)
// of sizeBytes in the sparse file dir+".img" and mounts it at dir through
// a loop device, without quotas: a pool whose clones and clone cache share
// data. Like MountTmpfs, dir must be inside the cluster directory.
func MountReflinkXFS(ctx context.Context, dir string, sizeBytes int64) error {
	return mountLoopFS(ctx, dir, "xfs", []string{"mkfs.xfs", "-q", "-m", "reflink=1"}, "loop", "CONFIG_XFS_FS", sizeBytes)
}

// mountLoopFS makes a filesystem with mkfs in dir+".img" and mounts it at
// dir with the mount options; needs names what the kernel must have.
func mountLoopFS(ctx context.Context, dir, fsType string, mkfs []string, options, needs string, sizeBytes int64) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s pool dir %q: must be absolute", fsType, dir)
	}
	if sizeBytes < 300<<20 {
		return fmt.Errorf("%s pool size %d: must be at least 300 MiB (mkfs.xfs refuses smaller)", fsType, sizeBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s pool dir: %w", fsType, err)
	}
	img := dir + ".img"
	f, err := os.Create(img)
	if err != nil {
		return fmt.Errorf("%s pool image: %w", fsType, err)
	}
	err = f.Truncate(sizeBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s pool image %s: %w", fsType, img, err)
	}
	var cmd hostCommander
	if _, err := cmd.Run(ctx, mkfs[0], append(mkfs[1:], img)...); err != nil {
		return err
	}
	if _, err := cmd.Run(ctx, "mount", "-t", fsType, "-o", options, img, dir); err != nil {
		return fmt.Errorf("%w (the kernel needs %s; its log says why)", err, needs)
	}
	return nil
}
