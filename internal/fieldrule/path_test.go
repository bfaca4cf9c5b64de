package fieldrule

import (
	"strings"
	"testing"
)

func TestCheckPoolPath(t *testing.T) {
	for _, tt := range []struct {
		in, clean string
		problem   PathProblem
	}{
		{"/var/hpvolumes", "/var/hpvolumes", PathOK},
		{"/var/hpvolumes/", "/var/hpvolumes", PathOK},
		{"/var//hpvolumes/.", "/var/hpvolumes", PathOK},
		{"/var/...", "/var/...", PathOK},
		{"", "", PathMissing},
		{"/a\x00", "", PathNUL},
		{"var/hpvolumes", "", PathRelative},
		{"/var/../etc", "", PathBackstep},
		{"/..", "", PathBackstep},
		{"/" + strings.Repeat("d", MaxPathLen), "", PathTooLong},
		{"/", "", PathRoot},
		{"//.", "", PathRoot},
	} {
		clean, problem, reason := CheckPoolPath(tt.in)
		if clean != tt.clean || problem != tt.problem || (problem == PathOK) != (reason == "") {
			t.Errorf("CheckPoolPath(%q) = %q, %v, %q; want %q, %v", tt.in, clean, problem, reason, tt.clean, tt.problem)
		}
	}
}

// AbsPath leaves length and "/" to the caller; CheckAbsPath also lets ".."
// through unless clean is set.
func TestAbsPathAndCheckAbsPath(t *testing.T) {
	long := "/" + strings.Repeat("d", MaxPathLen)
	for in, want := range map[string]string{"/": "/", "/a/": "/a", long: long} {
		if got, err := AbsPath("target_path", in); err != nil || got != want {
			t.Errorf("AbsPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := AbsPath("target_path", "/a/../b"); err == nil || err.Error() != `target_path: "/a/../b" must not contain a '..' element` {
		t.Errorf("AbsPath(/a/../b): %v", err)
	}
	if err := CheckAbsPath("root", "/a/../b", false); err != nil {
		t.Errorf("CheckAbsPath(/a/../b, false): %v", err)
	}
	if err := CheckAbsPath("root", "/a/", true); err == nil || err.Error() != `root: "/a/" must be a clean path ("/a")` {
		t.Errorf("CheckAbsPath(/a/, true): %v", err)
	}
	if err := CheckAbsPath("root", "", false); err == nil || err.Error() != "root: must not be empty" {
		t.Errorf("CheckAbsPath(empty): %v", err)
	}
}
