//go:build hpp_killpoints

package main

import (
	"os"
	"syscall"
)

// killPoint, in a build for crash tests only (go build -tags
// hpp_killpoints), SIGKILLs the process when the quota layer finishes the
// step named by HPP_KILL_AT (e.g. "assign.limited"; the steps are listed
// in internal/prjquota/doc.go), so a test can stop hpp-csi between any two
// steps and check what a restart makes of it.
func killPoint() func(string) {
	at := os.Getenv("HPP_KILL_AT")
	if at == "" {
		return nil
	}
	return func(step string) {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}
