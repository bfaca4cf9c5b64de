//go:build hpp_killpoints

package main

import (
	"fmt"
	"os"
	"syscall"
)

// killPoint, in a build for crash tests only (go build -tags
// hpp_killpoints), SIGKILLs the process when the quota layer finishes the
// step named by HPP_KILL_AT (e.g. "assign.limited"; the steps are listed
// in internal/prjquota/doc.go), so a test can stop hpp-csi between any two
// steps and check what a restart makes of it.
//
// It first writes the step to stderr (unbuffered: the line is in the pipe
// before the signal), so the test can tell a death at that point from one
// anywhere else (a panic, another step): test/quotanode reads the line.
func killPoint() func(string) {
	at := os.Getenv("HPP_KILL_AT")
	if at == "" {
		return nil
	}
	return func(step string) {
		if step == at {
			_, _ = fmt.Fprintf(os.Stderr, "hpp-csi: kill point %q reached: SIGKILL\n", step)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
