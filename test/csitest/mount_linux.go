package csitest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// Tmpfs mounts a tmpfs of sizeBytes (and nrInodes inodes when > 0) on a fresh
// temporary directory. Unlike testutil.TmpfsDir, its cleanup accepts that the
// test unmounted it already (a pool whose mount disappears). Skips unless
// root.
func Tmpfs(t testing.TB, sizeBytes, nrInodes int64) string {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	opts := fmt.Sprintf("size=%d,mode=0755", sizeBytes)
	if nrInodes > 0 {
		opts += fmt.Sprintf(",nr_inodes=%d", nrInodes)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount tmpfs (%s) on %s: %v", opts, dir, err)
	}
	t.Cleanup(func() {
		mounts, err := MountsAt(dir)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		for range mounts {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("cleanup: unmount %s: %v", dir, err)
				return
			}
		}
	})
	return dir
}

// MountEntry is one line of /proc/self/mountinfo.
type MountEntry struct {
	Major, Minor int
	Root         string
	MountPoint   string
	// Options are the per-mount options (ro, noexec, ...); SuperOptions
	// the filesystem's.
	Options      string
	FSType       string
	Source       string
	SuperOptions string
}

// HasOption reports whether the per-mount options include opt.
func (m MountEntry) HasOption(opt string) bool {
	for _, o := range strings.Split(m.Options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// Mounts parses /proc/self/mountinfo.
func Mounts() ([]MountEntry, error) { return mountsIn("/proc/self/mountinfo") }

// MountsAtIn returns the mounts stacked on target in the mount namespace
// of process pid, oldest first.
func MountsAtIn(pid int, target string) ([]MountEntry, error) {
	return mountsAt(fmt.Sprintf("/proc/%d/mountinfo", pid), target)
}

func mountsAt(mountinfo, target string) ([]MountEntry, error) {
	all, err := mountsIn(mountinfo)
	if err != nil {
		return nil, err
	}
	var out []MountEntry
	for _, m := range all {
		if m.MountPoint == target {
			out = append(out, m)
		}
	}
	return out, nil
}

func mountsIn(mountinfo string) ([]MountEntry, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []MountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m, err := parseMountInfo(sc.Text())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// MountsAt returns the mounts stacked on target, oldest first.
func MountsAt(target string) ([]MountEntry, error) { return mountsAt("/proc/self/mountinfo", target) }

func parseMountInfo(line string) (MountEntry, error) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+4 {
		return MountEntry{}, fmt.Errorf("mountinfo: malformed line %q", line)
	}
	var m MountEntry
	majmin := strings.SplitN(fields[2], ":", 2)
	if len(majmin) != 2 {
		return MountEntry{}, fmt.Errorf("mountinfo: bad device %q", fields[2])
	}
	var err1, err2 error
	m.Major, err1 = strconv.Atoi(majmin[0])
	m.Minor, err2 = strconv.Atoi(majmin[1])
	if err := errors.Join(err1, err2); err != nil {
		return MountEntry{}, fmt.Errorf("mountinfo: bad device %q: %w", fields[2], err)
	}
	m.Root = unescape(fields[3])
	m.MountPoint = unescape(fields[4])
	m.Options = fields[5]
	m.FSType = fields[sep+1]
	m.Source = unescape(fields[sep+2])
	m.SuperOptions = fields[sep+3]
	return m, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
