package testutil

import (
	"os"
	"testing"
)

// RequireRoot skips the test, with the reason, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("skipping: needs root (running as uid %d); run the node tests as root, e.g. sudo go test", os.Geteuid())
	}
}
