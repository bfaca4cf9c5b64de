package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"pvc-0b6c1c1e-3b9a-4f7e-9d0e-6f1f2a3b4c5d", "a", "A.b_c-9", "x..y", "-dash", strings.Repeat("a", MaxIDLen)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	tests := []struct{ id, want string }{
		{"", `volume id: must not be empty`},
		{".", `volume id: "." must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`},
		{"..", `volume id: ".." must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`},
		{".hpp-trash", `volume id: ".hpp-trash" must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`},
		{"/", `volume id: "/" must be a single directory name without '/'`},
		{"a/../..", `volume id: "a/../.." must be a single directory name without '/'`},
		{"../etc", `volume id: "../etc" must be a single directory name without '/'`},
		{"/etc", `volume id: "/etc" must be a single directory name without '/'`},
		{"a\x00b", `volume id: "a\x00b" must not contain a NUL byte`},
		{"a b", `volume id: "a b" contains " "; only letters, digits, '.', '_' and '-' are allowed`},
		{"a\\b", `volume id: "a\\b" contains "\\"; only letters, digits, '.', '_' and '-' are allowed`},
		{"pvc-é", `volume id: "pvc-é" contains "é"; only letters, digits, '.', '_' and '-' are allowed`},
		{"bad\xffutf8", `volume id: "bad\xffutf8" contains "\xff"; only letters, digits, '.', '_' and '-' are allowed`},
		{"a\nb", `volume id: "a\nb" contains "\n"; only letters, digits, '.', '_' and '-' are allowed`},
		{"lost+found", `volume id: "lost+found" is reserved: it is the filesystem's recovery directory`},
		{"csi", `volume id: "csi" is reserved: it is the directory that holds a pool's CSI volumes`},
		{strings.Repeat("a", 256), `volume id: is 256 bytes long; at most 255 are allowed (one directory entry)`},
		{strings.Repeat("a", 300), `volume id: is 300 bytes long; at most 255 are allowed (one directory entry)`},
	}
	for _, tt := range tests {
		err := ValidateID(tt.id)
		var fe *fieldrule.FieldError
		if !errors.As(err, &fe) || fe.Field != "volume id" || err.Error() != tt.want {
			t.Errorf("ValidateID(%q) = %v\n want %s", tt.id, err, tt.want)
		}
	}
}

// symlinkRoot builds a pool root with every kind of link an attacker or a
// confused admin could leave behind, next to a directory that must never be
// reached.
func symlinkRoot(t testing.TB) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "pool")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "real")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"escape":    outside,
		"etc":       "/etc",
		"up":        "..",
		"relup":     "../outside",
		"inside":    "real",
		"insideabs": filepath.Join(root, "real"),
		"self":      ".",
		"dangling":  "/nonexistent/hpp",
		"loop":      "loop",
		"chain":     "escape",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestResolveIn(t *testing.T) {
	root, outside := symlinkRoot(t)
	// A root that is itself a symlink is normal (e.g. /var/hpvolumes ->
	// /mnt/disk); only the id must not be a link.
	linkedRoot := filepath.Join(filepath.Dir(root), "linked-pool")
	if err := os.Symlink(root, linkedRoot); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{root, linkedRoot} {
		for _, id := range []string{"real", "file", "pvc-new"} {
			got, err := ResolveIn(r, id)
			if want := r + "/" + id; err != nil || got != want {
				t.Errorf("ResolveIn(%q, %q) = %q, %v; want %q", r, id, got, err, want)
			}
		}
	}
	missing := filepath.Join(root, "not-yet")
	if got, err := ResolveIn(missing, "pvc-1"); err != nil || got != missing+"/pvc-1" {
		t.Errorf("ResolveIn on a missing root = %q, %v", got, err)
	}

	tests := []struct{ id, want string }{
		{"escape", `volume id: "escape" is a symbolic link that resolves outside the pool (to "` + outside + `"); volumes are always real directories`},
		{"chain", `volume id: "chain" is a symbolic link that resolves outside the pool (to "` + outside + `"); volumes are always real directories`},
		{"relup", `volume id: "relup" is a symbolic link that resolves outside the pool (to "` + outside + `"); volumes are always real directories`},
		{"up", `volume id: "up" is a symbolic link that resolves outside the pool (to "` + filepath.Dir(root) + `"); volumes are always real directories`},
		{"self", `volume id: "self" is a symbolic link to the pool directory itself; volumes are always real directories`},
		{"etc", `volume id: "etc" is a symbolic link that resolves outside the pool (to "/etc"); volumes are always real directories`},
		{"inside", `volume id: "inside" is a symbolic link (to "` + root + `/real"); volumes are always real directories, so hpp refuses to follow it`},
		{"insideabs", `volume id: "insideabs" is a symbolic link (to "` + root + `/real"); volumes are always real directories, so hpp refuses to follow it`},
		{"dangling", `volume id: "dangling" is a symbolic link that cannot be resolved (no such file or directory); volumes are always real directories`},
		{"loop", `volume id: "loop" is a symbolic link that cannot be resolved (EvalSymlinks: too many links); volumes are always real directories`},
		{"..", `volume id: ".." must not start with '.' (hidden names such as ".", ".." and hpp's own ".hpp-*" directories are not volumes)`},
		{"a/../..", `volume id: "a/../.." must be a single directory name without '/'`},
	}
	for _, r := range []string{root, linkedRoot} {
		for _, tt := range tests {
			got, err := ResolveIn(r, tt.id)
			var fe *fieldrule.FieldError
			if !errors.As(err, &fe) || fe.Field != "volume id" || err.Error() != tt.want {
				t.Errorf("ResolveIn(%q, %q) = %q, %v\n want error %s", r, tt.id, got, err, tt.want)
			}
		}
	}
}

func TestResolveInBadRoot(t *testing.T) {
	tests := []struct{ root, want string }{
		{"", `root: must not be empty`},
		{"relative/dir", `root: "relative/dir" must be an absolute path`},
		{"/a/../b", `root: "/a/../b" must be a clean path ("/b")`},
		{"/a/", `root: "/a/" must be a clean path ("/a")`},
		{"/a\x00", `root: "/a\x00" must not contain a NUL byte`},
	}
	for _, tt := range tests {
		got, err := ResolveIn(tt.root, "pvc-1")
		var fe *fieldrule.FieldError
		if !errors.As(err, &fe) || fe.Field != "root" || err.Error() != tt.want {
			t.Errorf("ResolveIn(%q) = %q, %v\n want error %s", tt.root, got, err, tt.want)
		}
	}
}

func TestVolumePath(t *testing.T) {
	p := Pool{Name: "a", Path: t.TempDir()}
	got, err := p.VolumePath("pvc-1")
	if err != nil || got != p.Path+"/pvc-1" {
		t.Fatalf("VolumePath = %q, %v", got, err)
	}
	if _, err := p.VolumePath("../x"); err == nil {
		t.Fatal("VolumePath accepted ../x")
	}
}
