package testutil

import (
	"fmt"
	"os"
	"testing"
)

// RequireRoot skips the test, with the reason, unless it runs as root
// (under CI=true it fails instead: see MissingPrerequisite).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		MissingPrerequisite(t, "needs root (running as uid %d); run the node tests as root, e.g. sudo go test", os.Geteuid())
	}
}

// MissingPrerequisite ends a test whose tier cannot run here (no root, no
// loop device, no XFS, a tool missing): it skips with the reason, except
// under CI=true, where a tier that silently skipped would pass without
// having run, so it fails with the same reason.
func MissingPrerequisite(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing under CI=true (a skip would hide the tier): %s", reason)
		return
	}
	t.Skipf("skipping: %s", reason)
}
