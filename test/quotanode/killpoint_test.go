package quotanode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// killLine is what the hpp_killpoints build writes to stderr just before
// it SIGKILLs itself (cmd/hpp-csi/killpoint_on.go). Without it, a process
// that died of anything else (a panic, a kill point it was not sent to)
// would pass for one killed where the test asked.
var killLine = regexp.MustCompile(`hpp-csi: kill point "([a-z.]+)" reached: SIGKILL`)

// killedAt says why the run is not one where the call failed because
// hpp-csi died of SIGKILL at step and at no other kill point; nil when it
// is. log is what the process printed during the call.
func killedAt(log, step string, callErr, waitErr error) error {
	var at []string
	for _, m := range killLine.FindAllStringSubmatch(log, -1) {
		at = append(at, m[1])
	}
	var exit *exec.ExitError
	switch {
	case callErr == nil:
		return errors.New("the call succeeded")
	case !errors.As(waitErr, &exit):
		return fmt.Errorf("hpp-csi did not die: %w", waitErr)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("hpp-csi ended (%w), not by SIGKILL", exit)
	}
	switch {
	case len(at) == 0:
		return fmt.Errorf("hpp-csi was SIGKILLed but reached no kill point (killed by something else), want %q", step)
	case !slices.Equal(at, []string{step}):
		return fmt.Errorf("hpp-csi died at kill point %q, want exactly %q", at, step)
	}
	return nil
}

// callKilled restarts hpp-csi to die at step, makes the call and waits for
// the process to end; it returns what the process printed meanwhile, the
// call's error and the process's (for killedAt).
func callKilled(t *testing.T, d *csitest.Driver, step string, call func(context.Context, *csitest.Client) error) (log string, callErr, waitErr error) {
	t.Helper()
	restart(t, d, "HPP_KILL_AT="+step)
	from := d.LogLen()
	c, err := csitest.Connect(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	callErr = call(t.Context(), c)
	_ = c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	waitErr = d.Wait(ctx)
	cancel()
	return d.LogSince(from), callErr, waitErr
}

// TestKillPointNamesItsStep runs the kill point machinery where project
// quotas are not needed, so on the host too: the driver's own step
// create.published on a plain pool. The same death does not pass for one
// at another step.
func TestKillPointNamesItsStep(t *testing.T) {
	d := launchDriver(t, []csitest.Pool{{Name: poolName, Path: t.TempDir()}})
	const step = "create.published"
	log, callErr, waitErr := callKilled(t, d, step, func(ctx context.Context, c *csitest.Client) error {
		return createVolume(ctx, c, "pvc-killpoint", MiB)
	})
	if err := killedAt(log, step, callErr, waitErr); err != nil {
		t.Fatalf("killed at %q? %v", step, err)
	}
	if killedAt(log, "assign.linked", callErr, waitErr) == nil {
		t.Errorf("a death at %q passed for one at assign.linked", step)
	}
}
