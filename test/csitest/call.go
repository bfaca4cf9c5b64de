package csitest

import (
	"context"
	"testing"
	"time"
)

// CallTimeout bounds one call in tests: a hung driver fails the test instead
// of stalling the suite.
const CallTimeout = time.Minute

// Ctx is a context for one call, ended at the test's cleanup at the latest.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), CallTimeout)
	t.Cleanup(cancel)
	return c
}
