package testutil

import "testing"

func TestMissingPrerequisiteSkipsOrFailsUnderCI(t *testing.T) {
	for _, c := range []struct{ ci, how, msg string }{
		{"", "skip", "skipping: no loop device: EPERM"},
		{"false", "skip", "skipping: no loop device: EPERM"},
		{"true", "fail", "prerequisite missing under CI=true (a skip would hide the tier): no loop device: EPERM"},
	} {
		t.Setenv("CI", c.ci)
		r := &EndRecorder{TB: t}
		MissingPrerequisite(r, "no loop device: %s", "EPERM")
		if r.How != c.how || r.Msg != c.msg {
			t.Errorf("CI=%q: %s %q, want %s %q", c.ci, r.How, r.Msg, c.how, c.msg)
		}
	}
}
