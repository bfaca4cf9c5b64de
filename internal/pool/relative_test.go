package pool

import (
	"reflect"
	"strings"
	"testing"
)

// The KubeVirt operator's form: relative "<mount>/csi" paths, a snapshot
// directory beside the volumes, a shared pool.
func TestParseUpstreamFields(t *testing.T) {
	s, err := ParseRelativeTo([]byte(`[
		{"name":"local","path":"local-data-dir/csi","snapshotPath":"local-data-dir/snapshots","snapshotProvider":"reflink"},
		{"name":"nfs","path":"/nfs-data-dir/csi","shared":true}
	]`), "/")
	if err != nil {
		t.Fatalf("ParseRelativeTo: %v", err)
	}
	want := []Pool{
		{Name: "local", Path: "/local-data-dir/csi", SnapshotPath: "/local-data-dir/snapshots", SnapshotProvider: "reflink"},
		{Name: "nfs", Path: "/nfs-data-dir/csi", Shared: true},
	}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("All() = %+v\nwant %+v", got, want)
	}
}

func TestParseRelativeToWorkDir(t *testing.T) {
	s, err := ParseRelativeTo([]byte(`[{"name":"legacy","path":"data/csi"}]`), "/run/hpp")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Get("legacy"); p.Path != "/run/hpp/data/csi" {
		t.Fatalf("path = %q, want /run/hpp/data/csi", p.Path)
	}
}

// TestParseCleansPaths: any spelling of a directory that the pool-path
// rule accepts (a trailing '/', '//', '.') is stored cleaned, absolute or
// relative, so the pools are compared and used in one spelling.
func TestParseCleansPaths(t *testing.T) {
	s, err := ParseRelativeTo([]byte(`[{"name":"a","path":"/var//x/","snapshotPath":"/var/x/snaps/","legacyPath":"/var/./"},
		{"name":"b","path":"b/./csi/"}]`), "/")
	if err != nil {
		t.Fatal(err)
	}
	want := []Pool{{Name: "a", Path: "/var/x", SnapshotPath: "/var/x/snaps", LegacyPath: "/var"}, {Name: "b", Path: "/b/csi"}}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pools = %+v\nwant %+v", got, want)
	}
}

func TestParseUpstreamFieldErrors(t *testing.T) {
	tests := []struct {
		name, workDir, in string
		want              []string
	}{
		{"relative without a working directory", "", `[{"name":"a","path":"a/csi"}]`, []string{
			`datadir[0].path: "a/csi" must be an absolute path`}},
		{"relative path leaves the working directory", "/", `[{"name":"a","path":"../a"},{"name":"b","path":"b/../../csi"}]`, []string{
			`datadir[0].path: "../a" must not contain a '..' element`,
			`datadir[1].path: "b/../../csi" must not contain a '..' element`}},
		{"wrong types", "/", `[{"name":"a","path":"/a","shared":"yes","snapshotPath":1,"snapshotProvider":false}]`, []string{
			`datadir[0].shared: must be true or false, got a string`,
			`datadir[0].snapshotPath: must be a string, got the number 1`,
			`datadir[0].snapshotProvider: must be a string, got a boolean`}},
		{"unknown provider", "/", `[{"name":"a","path":"/a/csi","snapshotProvider":"zfs"}]`, []string{
			`datadir[0].snapshotProvider: "zfs" is not a known snapshot provider; the only one is "reflink"`}},
		{"snapshots among the volumes", "/", `[{"name":"a","path":"/a/csi","snapshotPath":"/a/csi/snap/x"},{"name":"b","path":"/b/csi","snapshotPath":"/b/csi"},{"name":"c","path":"/c/csi","snapshotPath":"/c"}]`, []string{
			`datadir[0].snapshotPath: "/a/csi/snap/x" is nested below the pool's path "/a/csi", where every directory is a volume; put it directly in it (e.g. /a/csi/snapshots) or beside it (e.g. /a/snapshots)`,
			`datadir[1].snapshotPath: "/b/csi" is the pool's path; snapshots need their own directory`,
			`datadir[2].snapshotPath: "/c" contains the pool's path "/c/csi"; snapshots and volumes must not be nested`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRelativeTo([]byte(tt.in), tt.workDir)
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// The KubeVirt operator's snapshot area is a directory directly in the
// volumes directory; hpp sets it aside by name (dirvol.Options.NotVolumes).
func TestSnapshotPathDirectlyInThePool(t *testing.T) {
	set, err := ParseRelativeTo([]byte(`[{"name":"a","path":"/a/csi","snapshotPath":"/a/csi/snapshots","snapshotProvider":"reflink"}]`), "/")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := set.Get("a"); p.SnapshotPath != "/a/csi/snapshots" {
		t.Fatalf("snapshotPath = %q", p.SnapshotPath)
	}
	_, err = ParseRelativeTo([]byte(`[{"name":"a","path":"/a/csi","snapshotPath":"/a/csi/.snap"}]`), "/")
	if err == nil || !strings.Contains(err.Error(), `datadir[0].snapshotPath: "/a/csi/.snap": its name inside the pool's path is not usable`) {
		t.Fatalf("err = %v", err)
	}
}
