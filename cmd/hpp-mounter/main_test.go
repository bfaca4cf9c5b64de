package main

import "testing"

// Exit codes are the contract with the operator (README.md).
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--mountPath", "rel/csi"}, 2},
		{[]string{"--mountPath", "/"}, 2},
		{[]string{"--mountPath", "/p/csi", "--check-interval", "0s"}, 2},
		{[]string{"--mountPath", "/p/csi", "--no-such-flag"}, 2},
		{[]string{"unmount"}, 2}, // --mountPath is required
		// Nothing mounted there: done, also when run again.
		{[]string{"unmount", "--mountPath", "/hpp-test/never/mounted/csi", "--hostPath", "/"}, 0},
		{[]string{"--unmount", "--mountPath", "/hpp-test/never/mounted/csi", "--storagePoolPath", "/dev/data", "--health-address", ""}, 0},
	} {
		if got := run(append(c.args, "--log-level", "error")); got != c.code {
			t.Errorf("hpp-mounter %q: exit %d, want %d", c.args, got, c.code)
		}
	}
}
