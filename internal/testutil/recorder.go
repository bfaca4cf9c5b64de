package testutil

import (
	"fmt"
	"testing"
)

// EndRecorder is a testing.TB for the tests of helpers that end a test
// (MissingPrerequisite and the like): it notes how the helper ended it
// instead of ending it. How is "skip" or "fail" ("" while the test went
// on), Msg the message. Its Fatalf and Skipf return, so the helper under
// test carries on past them.
type EndRecorder struct {
	testing.TB
	How, Msg string
}

func (r *EndRecorder) Helper() {}
func (r *EndRecorder) Fatalf(format string, args ...any) {
	r.How, r.Msg = "fail", fmt.Sprintf(format, args...)
}
func (r *EndRecorder) Skipf(format string, args ...any) {
	r.How, r.Msg = "skip", fmt.Sprintf(format, args...)
}
