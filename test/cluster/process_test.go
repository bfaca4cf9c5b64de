package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func sleepSpec(t *testing.T, restart bool) ProcessSpec {
	t.Helper()
	sleep := "/bin/sleep"
	if _, err := os.Stat(sleep); err != nil {
		testutil.MissingPrerequisite(t, "no %s: %v", sleep, err)
	}
	return ProcessSpec{Name: "sleeper", Path: sleep, Args: []string{"600"}, StopTimeout: 5 * time.Second, RestartOnExit: restart}
}

// A killed process with RestartOnExit comes back as a new incarnation, as
// kubelet restarts a crashed container; Stop ends it for good.
func TestProcessRestartsAfterKillButNotAfterStop(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(sleepSpec(t, true), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := p.Pid()
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Pid() == first || p.Restarts() != 1 {
		t.Errorf("after Kill: pid %d (was %d), restarts %d; want a new pid and 1 restart", p.Pid(), first, p.Restarts())
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // longer than the restart delay
	if p.Running() {
		t.Fatal("process restarted after Stop")
	}
	log := readLog(t, p.LogPath())
	if n := strings.Count(log, "harness: starting /bin/sleep 600"); n != 2 {
		t.Errorf("log has %d start lines, want 2:\n%s", n, log)
	}
	if !strings.Contains(log, "sleeper exited: signal: killed") || !strings.Contains(log, "sleeper exited: signal: terminated") {
		t.Errorf("log lacks the kill and the stop:\n%s", log)
	}
}

func TestProcessWithoutRestartStaysDown(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(sleepSpec(t, false), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if p.Running() {
		t.Fatal("process without RestartOnExit restarted")
	}
	if err := p.ExitError(); err == nil || err.Error() != "signal: killed" {
		t.Errorf("ExitError = %v, want signal: killed", err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop(context.Background()) }()
	if !p.Running() {
		t.Error("Restart did not start the process")
	}
}

func TestProcessSpecValidateNamesFields(t *testing.T) {
	err := ProcessSpec{Path: "relative", StopTimeout: -1}.validate()
	if err == nil {
		t.Fatal("validate accepted a bad spec")
	}
	for _, want := range []string{"process name: must not be empty", `path "relative": must be absolute`, "stop timeout -1ns: must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	err = ProcessSpec{Name: "d", Path: filepath.Clean(os.TempDir())}.validate()
	if err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("a directory as path: %v", err)
	}
}

func readLog(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
