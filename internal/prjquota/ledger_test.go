package prjquota

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

const MiB = 1 << 20

type env struct {
	root string
	fake *Fake
	rng  pool.IDRange
	// vols are the volumes that exist: id -> capacity.
	vols map[string]int64
}

func newEnv(t *testing.T, rng pool.IDRange) *env {
	return &env{root: t.TempDir(), fake: NewFake(), rng: rng, vols: map[string]int64{}}
}

func (e *env) open(t *testing.T, step func(string)) *Ledger {
	t.Helper()
	l, err := Open(Options{Root: e.root, Range: e.rng, Backend: e.fake, Step: step})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func (e *env) lookup(_ context.Context, id string) (string, int64, bool, error) {
	c, ok := e.vols[id]
	return filepath.Join(e.root, id), c, ok, nil
}

// create is what the driver does: assign, apply on the staged directory,
// publish.
func (e *env) create(t *testing.T, l *Ledger, id string, capacity int64) uint32 {
	t.Helper()
	q, err := l.Assign(id, capacity)
	if err != nil {
		t.Fatalf("Assign %s: %v", id, err)
	}
	if err := l.Apply(filepath.Join(e.root, id), q); err != nil {
		t.Fatal(err)
	}
	e.vols[id] = capacity
	return q
}

func TestAssignUniqueWithinRange(t *testing.T) {
	e := newEnv(t, pool.IDRange{First: 10, Last: 13})
	l := e.open(t, nil)
	// ID 11 is another user's (usage on the filesystem): never handed out.
	e.fake.SetUsage(11, 4096, 1)
	got := map[uint32]bool{}
	for _, v := range []string{"pvc-a", "pvc-b", "pvc-c"} {
		id := e.create(t, l, v, 100*MiB)
		if got[id] || id < 10 || id > 13 || id == 11 {
			t.Fatalf("volume %s got project %d (held so far %v; 11 is foreign)", v, id, got)
		}
		got[id] = true
		if lim := e.fake.Limit(id); lim != 100*MiB {
			t.Errorf("project %d limit = %d, want %d", id, lim, 100*MiB)
		}
		if link, _ := os.Readlink(filepath.Join(e.root, StateDir, itoa(id))); link != v {
			t.Errorf("link of project %d = %q, want %q", id, link, v)
		}
	}
	// A retry of a create gets the same ID.
	id, _, _ := l.Held("pvc-b")
	if again, err := l.Assign("pvc-b", 100*MiB); err != nil || again != id {
		t.Fatalf("retried Assign = %d, %v; want %d", again, err, id)
	}
	_, err := l.Assign("pvc-d", MiB)
	if !errors.Is(err, ErrNoIDs) || !strings.Contains(err.Error(), "all 4 project IDs of the pool's range 10-13 are held or in use on the filesystem; widen projectIDs in --datadir") {
		t.Fatalf("Assign past the range: %v", err)
	}
	if _, err := l.Assign("pvc-e", 0); err == nil || err.Error() != `volume "pvc-e" has no size to enforce` {
		t.Fatalf("Assign of size 0: %v", err)
	}
}

func TestReleasedIDWaitsForItsBlocks(t *testing.T) {
	e := newEnv(t, pool.IDRange{First: 1, Last: 1})
	l := e.open(t, nil)
	id := e.create(t, l, "pvc-a", MiB)
	e.fake.SetUsage(id, MiB, 10) // the data, now in the trash
	if err := l.Release("pvc-a"); err != nil {
		t.Fatal(err)
	}
	if lim := e.fake.Limit(id); lim != 0 {
		t.Errorf("limit after release = %d, want 0", lim)
	}
	if _, err := l.Assign("pvc-b", MiB); !errors.Is(err, ErrNoIDs) {
		t.Fatalf("an ID still charged with the trash's blocks was handed out: %v", err)
	}
	e.fake.SetUsage(id, 0, 0) // purged
	if got, err := l.Assign("pvc-b", MiB); err != nil || got != id {
		t.Fatalf("Assign after the purge = %d, %v; want %d", got, err, id)
	}
}

type crash struct{ at string }

// runUntil runs f with a Step hook that panics at step, as a SIGKILL
// there would stop the process; it reports whether the step was reached.
func runUntil(step string, f func(step func(string))) (reached bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			reached = true
		}
	}()
	f(func(s string) {
		if s == step {
			panic(crash{at: s})
		}
	})
	return false
}

// A crash after each step of create, grow and release, then a restart
// (Open and Recover): the volume's ID and limit match what it is, and an
// ID whose volume is gone is free again.
func TestRecoverAfterCrashAtEveryStep(t *testing.T) {
	steps := []string{"assign.linked", "assign.limited", "apply", "grow.limited", "release.unlimited", "release.unlinked"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			e := newEnv(t, pool.IDRange{First: 100, Last: 199})
			dir := filepath.Join(e.root, "pvc-x")
			reached := runUntil(step, func(hook func(string)) {
				l := e.open(t, hook)
				id, err := l.Assign("pvc-x", 100*MiB)
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Apply(dir, id); err != nil {
					t.Fatal(err)
				}
				e.vols["pvc-x"] = 100 * MiB // published
				e.vols["pvc-x"] = 300 * MiB // expand: record first
				if err := l.Grow("pvc-x", 300*MiB); err != nil {
					t.Fatal(err)
				}
				delete(e.vols, "pvc-x") // delete: directory to the trash
				if err := l.Release("pvc-x"); err != nil {
					t.Fatal(err)
				}
			})
			if !reached {
				t.Fatalf("step %s never reached", step)
			}
			l := e.open(t, nil)
			rep, err := l.Recover(context.Background(), e.lookup)
			if err != nil {
				t.Fatal(err)
			}
			capacity, exists := e.vols["pvc-x"]
			id, limit, held := l.Held("pvc-x")
			links, _ := os.ReadDir(filepath.Join(e.root, StateDir))
			switch {
			case exists:
				if !held || limit != capacity || e.fake.Limit(id) != capacity || e.fake.ProjectOf(dir) != id {
					t.Fatalf("after recovery: held %v project %d limit %d (kernel %d), directory's project %d; want the volume's %d bytes on its ID (%+v)",
						held, id, limit, e.fake.Limit(id), e.fake.ProjectOf(dir), capacity, rep)
				}
			default:
				if held || len(links) != 0 || e.fake.Limit(100) != 0 {
					t.Fatalf("after recovery of a volume that is gone: held %v, links %d, limit of 100 = %d; want nothing (%+v)", held, len(links), e.fake.Limit(100), rep)
				}
			}
		})
	}
}

// The directory's ID is set inside first and on the directory last, so an
// adoption cut short is finished by Recover.
func TestAdoptCutShortIsFinished(t *testing.T) {
	e := newEnv(t, pool.IDRange{First: 5, Last: 9})
	dir := filepath.Join(e.root, "pvc-old")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.vols["pvc-old"] = 50 * MiB
	failed := errors.New("killed")
	e.fake.Fail = func(op string, id uint32) error {
		if op == "SetProject" && e.fake.Calls[op] == 2 {
			return failed
		}
		return nil
	}
	l := e.open(t, nil)
	if _, err := l.Adopt(context.Background(), dir, "pvc-old", 50*MiB); !errors.Is(err, failed) {
		t.Fatalf("Adopt = %v, want the injected failure", err)
	}
	e.fake.Fail = nil
	l = e.open(t, nil)
	rep, err := l.Recover(context.Background(), e.lookup)
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := l.Held("pvc-old")
	for _, p := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "f")} {
		if got := e.fake.ProjectOf(p); got != id || id == 0 {
			t.Errorf("%s has project %d, want %d", p, got, id)
		}
	}
	if rep.Relabelled != 1 {
		t.Errorf("report %+v, want one volume relabelled", rep)
	}
}

func TestCheckNamesWhatToAdd(t *testing.T) {
	tests := []struct {
		probe Probe
		want  string
	}{
		{Probe{FSType: "xfs", NoQuotactl: syscall.ENOSYS}, "enforceSize: /p is XFS, but this kernel has no XFS quota support (quotactl: function not implemented); use a kernel built with CONFIG_XFS_QUOTA"},
		{Probe{FSType: "xfs"}, "enforceSize: /p is XFS without project quotas enforced; mount it with the prjquota option (in /etc/fstab or the mount unit: XFS turns quotas on only at mount, not on remount)"},
		{Probe{FSType: "ext4"}, "enforceSize: /p is ext4 without project quota accounting; add the features with tune2fs -O project,quota <device> while it is unmounted (mkfs.ext4 -O project,quota for a new one), then mount it with the prjquota option (a kernel without CONFIG_QFMT_V2 refuses that mount)"},
		{Probe{FSType: "ext4", Accounting: true}, "enforceSize: /p is ext4 with project quotas counted but not enforced; mount it with the prjquota option"},
		{Probe{FSType: "ext4", NoQuotactl: syscall.ENOSYS}, "enforceSize: /p is ext4, but this kernel has no quota support for it (quotactl: function not implemented); use a kernel built with CONFIG_QUOTA and CONFIG_QFMT_V2"},
		{Probe{FSType: "0x1021994"}, "enforceSize: /p is on a 0x1021994 filesystem; size enforcement needs XFS mounted with prjquota, or ext4 with the features project,quota mounted with prjquota"},
		{Probe{FSType: "ext4", Accounting: true, Enforcing: true}, ""},
	}
	for _, tt := range tests {
		f := NewFake()
		f.SetProbe(tt.probe)
		err := Check(f, "/p")
		if got := errString(err); got != tt.want {
			t.Errorf("Check(%+v) = %q\nwant %q", tt.probe, got, tt.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func itoa(id uint32) string { return strconv.FormatUint(uint64(id), 10) }

func TestLiftClearsEveryLimit(t *testing.T) {
	e := newEnv(t, pool.IDRange{First: 1, Last: 5})
	l := e.open(t, nil)
	a, b := e.create(t, l, "pvc-a", MiB), e.create(t, l, "pvc-b", 2*MiB)
	n, err := Lift(e.root, e.fake)
	if err != nil || n != 2 || e.fake.Limit(a) != 0 || e.fake.Limit(b) != 0 {
		t.Fatalf("Lift = %d, %v; limits %d, %d; want 2 lifted, no limits", n, err, e.fake.Limit(a), e.fake.Limit(b))
	}
	if left, _ := os.ReadDir(filepath.Join(e.root, StateDir)); len(left) != 0 {
		t.Fatalf("links left: %d", len(left))
	}
}
