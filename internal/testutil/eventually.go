package testutil

import (
	"testing"
	"time"
)

// Eventually polls f every 100 ms until it returns nil, and fails the test
// with what and f's last error once bound has passed. The bound only stops
// a broken test from hanging; it is not a speed assertion.
func Eventually(t testing.TB, bound time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %v: %v", what, bound, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
