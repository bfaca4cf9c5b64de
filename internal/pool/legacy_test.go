package pool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseLegacyPath(t *testing.T) {
	s, err := Parse([]byte(`[{"name":"legacy","path":"/var/hpvolumes/csi","legacyPath":"/var/hpvolumes"},{"name":"b","path":"/b/csi"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Get("legacy"); p.LegacyPath != "/var/hpvolumes" {
		t.Fatalf("legacyPath = %q", p.LegacyPath)
	}
	if p, _ := s.Get("b"); p.LegacyPath != "" {
		t.Fatalf("legacyPath of b = %q, want none", p.LegacyPath)
	}
}

func TestParseLegacyPathErrors(t *testing.T) {
	in := `[
		{"name":"a","path":"/a/csi","legacyPath":"/a/csi"},
		{"name":"b","path":"/b/csi","legacyPath":"/b/csi/old"},
		{"name":"c","path":"/c/csi","legacyPath":"/a/csi/x"},
		{"name":"d","path":"/d/csi","legacyPath":"/legacy"},
		{"name":"e","path":"/e/csi","legacyPath":"/legacy"},
		{"name":"f","path":"/f/csi","legacyPath":"/legacy/inner"},
		{"name":"g","path":"/g/csi","legacyPath":"rel"},
		{"name":"h","path":"/h/csi","legacyPath":"/h/../x"},
		{"name":"i","path":"/i/csi","legacyPath":"/snaps/i","snapshotPath":"/snaps"},
		{"name":"j","path":"/j/csi","legacyPath":42}]`
	_, err := Parse([]byte(in))
	assertFieldErrors(t, err, []string{
		`datadir[9].legacyPath: must be a string, got the number 42`,
		`datadir[0].legacyPath: "/a/csi" is the pool's path; it must be the legacy provisioner's PV_DIR, where the legacy volumes are (for a pool at <dir>/csi usually <dir>)`,
		`datadir[1].legacyPath: "/b/csi/old" is inside the pool's path "/b/csi", where every directory is a CSI volume`,
		`datadir[2].legacyPath: "/a/csi/x" is inside datadir[0].path "/a/csi", where every directory is a CSI volume`,
		`datadir[3].legacyPath: "/legacy" is already used by datadir[4].legacyPath; two pools may not share one`,
		`datadir[4].legacyPath: "/legacy" is already used by datadir[3].legacyPath; two pools may not share one`,
		`datadir[5].legacyPath: "/legacy/inner" and datadir[3].legacyPath "/legacy" are nested; legacy directories must not be`,
		`datadir[6].legacyPath: "rel" must be an absolute path`,
		`datadir[7].legacyPath: "/h/../x" must not contain a '..' element`,
		`datadir[8].legacyPath: "/snaps/i" is inside datadir[8].snapshotPath "/snaps"`,
	})
}

func TestLegacyVolumePath(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "hpvolumes")
	s, err := NewSet([]Pool{
		{Name: "legacy", Path: filepath.Join(legacy, "csi"), LegacyPath: legacy, SnapshotPath: filepath.Join(legacy, "snaps", "x")},
		{Name: "other", Path: filepath.Join(legacy, "pool2", "csi")},
		{Name: "none", Path: filepath.Join(dir, "none")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(legacy, "pvc-1"), filepath.Join(dir, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "outside"), filepath.Join(legacy, "pvc-link")); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Get("legacy")
	if got, err := s.LegacyVolumePath(p, "pvc-1"); err != nil || got != filepath.Join(legacy, "pvc-1") {
		t.Fatalf("LegacyVolumePath = %q, %v", got, err)
	}
	for id, want := range map[string]string{
		"pool2":    `volume id: "pool2" is not a legacy volume: ` + legacy + `/pool2 holds datadir[1].path "` + legacy + `/pool2/csi"`,
		"snaps":    `volume id: "snaps" is not a legacy volume: ` + legacy + `/snaps holds datadir[0].snapshotPath "` + legacy + `/snaps/x"`,
		"csi":      `volume id: "csi" is reserved: it is the directory that holds a pool's CSI volumes`,
		"..":       `volume id: ".." must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`,
		"pvc-link": `volume id: "pvc-link" is a symbolic link that resolves outside the pool (to "` + filepath.Join(dir, "outside") + `"); volumes are always real directories`,
	} {
		if _, err := s.LegacyVolumePath(p, id); err == nil || err.Error() != want {
			t.Errorf("LegacyVolumePath(%q) error = %v\nwant %s", id, err, want)
		}
	}
	none, _ := s.Get("none")
	if _, err := s.LegacyVolumePath(none, "pvc-1"); err == nil || err.Error() != `legacyPath: storage pool "none" has none; legacy volumes need the pool's "legacyPath" in --datadir` {
		t.Fatalf("pool without legacyPath: %v", err)
	}
}
