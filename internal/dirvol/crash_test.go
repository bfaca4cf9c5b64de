package dirvol_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// The crash child: the test binary re-executed with these variables runs
// Create or Delete over a list of ids and SIGKILLs itself in the middle of
// one of them, at a chosen step.
const (
	envCrashChild = "HPP_DIRVOL_CRASH_CHILD" // "create" or "delete"
	envCrashRoot  = "HPP_DIRVOL_CRASH_ROOT"
	envCrashIDs   = "HPP_DIRVOL_CRASH_IDS" // comma separated
	envCrashAt    = "HPP_DIRVOL_CRASH_AT"  // index in the ids of the operation that is killed
	// "<n>": killed right after the n-th (1-based) mutating FileSystem call
	// of that operation; "mid-removeall": killed while the trash entry is
	// being removed, with part of it gone.
	envCrashStep = "HPP_DIRVOL_CRASH_STEP"
)

const (
	crashIDs     = 5
	crashAt      = 2
	midRemoveAll = "mid-removeall"
)

func TestMain(m *testing.M) {
	if op := os.Getenv(envCrashChild); op != "" {
		os.Exit(crashChild(op))
	}
	if root := os.Getenv(envSharedChild); root != "" {
		os.Exit(sharedChild(root))
	}
	os.Exit(m.Run())
}

// crashSpec is what the crash tests create: an owner other than the
// process's when root, so a half-applied owner would show.
func crashSpec() dirvol.Spec {
	sp := dirvol.Spec{Ownership: dirvol.Ownership{UID: -1, GID: -1, Mode: 0o750}, CapacityBytes: 3 << 30}
	if os.Geteuid() == 0 {
		sp.UID, sp.GID = 1000, 2000
	}
	return sp
}

// crashContent fills a volume for the delete tests: files at two levels, so
// that a kill in the middle of removing it leaves a partial tree.
func crashContent(t testing.TB, dir string) {
	for _, d := range []string{"a", "a/b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(dir, d, fmt.Sprintf("f%d", i)), []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func crashChild(op string) int {
	root := os.Getenv(envCrashRoot)
	ids := strings.Split(os.Getenv(envCrashIDs), ",")
	at, err := strconv.Atoi(os.Getenv(envCrashAt))
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", envCrashAt, err)
		return 2
	}
	step := os.Getenv(envCrashStep)
	h := &hookFS{FileSystem: dirvol.OS()}
	s, err := dirvol.Open(root, testOptions(h))
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
		return 2
	}
	for i, id := range ids {
		if i == at {
			arm(h, root, step)
		}
		switch op {
		case "create":
			_, _, err = s.Create(context.Background(), id, crashSpec())
		case "delete":
			err = s.Delete(context.Background(), id)
		default:
			err = fmt.Errorf("unknown operation %q", op)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "crash child: %s %s: %v\n", op, id, err)
			return 2
		}
	}
	fmt.Fprintf(os.Stderr, "crash child: %s of %q finished without reaching crash step %s\n", op, ids[at], step)
	return 3
}

// arm installs the kill at the chosen step.
func arm(h *hookFS, root, step string) {
	if step == midRemoveAll {
		h.before = func(c call) error {
			if c.Op == "RemoveAll" && area(root, c.Paths[0]) == "trash" {
				removeOneFile(c.Paths[0])
				die()
			}
			return nil
		}
		return
	}
	n, err := strconv.Atoi(step)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", envCrashStep, err)
		os.Exit(2)
	}
	done := 0
	h.after = func(call) {
		if done++; done == n {
			die()
		}
	}
}

// removeOneFile does what a RemoveAll cut short would have done: removed
// some, not all, of the tree.
func removeOneFile(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			_ = os.Remove(p)
			return filepath.SkipAll
		}
		return nil
	})
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Minute) // SIGKILL cannot be caught; this is never reached
	os.Exit(4)
}

// crashPoint is where a child is killed: after n mutating calls.
type crashPoint struct {
	name, step string
	n          int
}

// crashSuite proves that a process killed between any two steps of Create
// or Delete leaves a root that Recover makes consistent: every id fully
// present or fully absent, staging and trash empty, and a retry succeeds.
func crashSuite(t *testing.T, base string) {
	for _, op := range []string{"create", "delete"} {
		t.Run(op, func(t *testing.T) {
			steps, commit := crashSteps(t, filepath.Join(base, op+"-probe"), op)
			var points []crashPoint
			for n := 1; n <= len(steps); n++ {
				points = append(points, crashPoint{fmt.Sprintf("after-%d-%s", n, steps[n-1]), strconv.Itoa(n), n})
			}
			if op == "delete" {
				points = append(points, crashPoint{"during-" + steps[len(steps)-1], midRemoveAll, len(steps) - 1})
			}
			for i, p := range points {
				t.Run(p.name, func(t *testing.T) {
					crashCase(t, filepath.Join(base, fmt.Sprintf("%s-%02d", op, i)), op, p, p.n > commit)
				})
			}
		})
	}
}

// crashSteps returns the labels of op's mutating calls and the index of the
// call that commits it (the rename that makes the volume appear or vanish).
func crashSteps(t *testing.T, root, op string) ([]string, int) {
	var calls []call
	commitLabel := "RenameNoReplace(staging→volume)"
	if op == "create" {
		calls = probe(t, root, nil, func(s *dirvol.Store) error {
			_, _, err := s.Create(context.Background(), "probe", crashSpec())
			return err
		})
	} else {
		commitLabel = "Rename(volume→trash)"
		setup := func(s *dirvol.Store) { crashContent(t, mustCreate(t, s, "probe", crashSpec()).Path) }
		calls = probe(t, root, setup, func(s *dirvol.Store) error { return s.Delete(context.Background(), "probe") })
	}
	steps := labels(root, calls)
	commit := slices.Index(steps, commitLabel)
	if commit < 0 {
		t.Fatalf("%s steps %q have no %s", op, steps, commitLabel)
	}
	return steps, commit
}

func crashCase(t *testing.T, root, op string, p crashPoint, committed bool) {
	ids := make([]string, crashIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("pvc-%d", i)
	}
	if op == "delete" {
		s := open(t, root, nil)
		for _, id := range ids {
			crashContent(t, mustCreate(t, s, id, crashSpec()).Path)
		}
	}
	runCrashChild(t, root, op, ids, p.step)

	before := leftovers(t, root)
	rep, err := open(t, root, nil).Recover(context.Background())
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if rep != before {
		t.Errorf("Recover reported %+v; the root held %+v", rep, before)
	}
	requirePrivateAreasEmpty(t, root)

	// Ids before the killed one are done, ids after it untouched, and the
	// killed one is done exactly when the commit rename happened.
	for i, id := range ids {
		done := i < crashAt || (i == crashAt && committed)
		requireState(t, root, id, done == (op == "create"))
	}

	s := open(t, root, nil)
	switch op {
	case "create":
		_, created, err := s.Create(context.Background(), ids[crashAt], crashSpec())
		if err != nil || created == committed {
			t.Fatalf("retried Create: created=%v err=%v; want created=%v", created, err, !committed)
		}
		requireState(t, root, ids[crashAt], true)
	case "delete":
		if err := s.Delete(context.Background(), ids[crashAt]); err != nil {
			t.Fatalf("retried Delete: %v", err)
		}
		requireState(t, root, ids[crashAt], false)
	}
	requirePrivateAreasEmpty(t, root)
}

func runCrashChild(t *testing.T, root, op string, ids []string, step string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envCrashChild+"="+op, envCrashRoot+"="+root, envCrashIDs+"="+strings.Join(ids, ","),
		envCrashAt+"="+strconv.Itoa(crashAt), envCrashStep+"="+step)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("crash child was not killed (err %v): %s", err, out)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("crash child ended with %v, not SIGKILL: %s", err, out)
	}
}

// leftovers counts what Recover should clean: staging and trash entries and
// meta files without a directory.
func leftovers(t *testing.T, root string) dirvol.RecoverReport {
	var r dirvol.RecoverReport
	r.RemovedStaging = len(names(t, filepath.Join(root, dirvol.StagingDir)))
	r.FinishedDeletes = len(names(t, filepath.Join(root, dirvol.TrashDir)))
	for _, n := range names(t, filepath.Join(root, dirvol.RecordsDir)) {
		if !exists(t, filepath.Join(root, n)) {
			r.RemovedOrphanMeta++
		}
	}
	return r
}

// requireState checks that id is fully present (directory with its mode,
// owner, record and, for pre-filled volumes, all content) or fully absent.
func requireState(t *testing.T, root, id string, present bool) {
	t.Helper()
	dir := filepath.Join(root, id)
	hasDir, hasMeta := exists(t, dir), hasRecord(t, root, id)
	if hasDir != present || hasMeta != present {
		t.Errorf("%s: directory %v, record %v; want both %v", id, hasDir, hasMeta, present)
		return
	}
	if !present {
		return
	}
	sp := crashSpec()
	mode, uid, gid := stat(t, dir)
	if mode != os.ModeDir|sp.Mode || (sp.UID >= 0 && (int(uid) != sp.UID || int(gid) != sp.GID)) {
		t.Errorf("%s: mode %s owner %d:%d; want %s %d:%d", id, mode, uid, gid, os.ModeDir|sp.Mode, sp.UID, sp.GID)
	}
	if m := readMeta(t, root, id); m["id"] != id || m["capacityBytes"] != float64(sp.CapacityBytes) {
		t.Errorf("%s: meta %v", id, m)
	}
	if exists(t, filepath.Join(dir, "data")) {
		// A pre-filled volume that survived must have lost nothing.
		var files int
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files++
			}
			return nil
		})
		if files != 7 {
			t.Errorf("%s: %d files left of 7", id, files)
		}
	}
}

// TestCrashSafety runs the crash suite on the test's temp dir; the node tests
// run it on tmpfs and XFS.
func TestCrashSafety(t *testing.T) {
	inRecordForms(t, t.TempDir(), crashSuite)
}
