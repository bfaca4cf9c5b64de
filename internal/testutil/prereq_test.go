package testutil

import (
	"fmt"
	"testing"
)

// recordTB notes how a test was ended instead of ending it.
type recordTB struct {
	testing.TB
	how, msg string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.how, r.msg = "fail", fmt.Sprintf(format, args...)
}
func (r *recordTB) Skipf(format string, args ...any) {
	r.how, r.msg = "skip", fmt.Sprintf(format, args...)
}

func TestMissingPrerequisiteSkipsOrFailsUnderCI(t *testing.T) {
	for _, c := range []struct{ ci, how, msg string }{
		{"", "skip", "skipping: no loop device: EPERM"},
		{"false", "skip", "skipping: no loop device: EPERM"},
		{"true", "fail", "prerequisite missing under CI=true (a skip would hide the tier): no loop device: EPERM"},
	} {
		t.Setenv("CI", c.ci)
		r := &recordTB{TB: t}
		MissingPrerequisite(r, "no loop device: %s", "EPERM")
		if r.how != c.how || r.msg != c.msg {
			t.Errorf("CI=%q: %s %q, want %s %q", c.ci, r.how, r.msg, c.how, c.msg)
		}
	}
}
