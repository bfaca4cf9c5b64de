package pool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`[{"name":"legacy","path":"/var/hpvolumes"}]`,
		`[{"name":"a","path":"/a","reservedBytes":1,"reservedPercent":99.999}]`,
		`[{"name":"a","path":"/a"},{"name":"b","path":"/a/b"}]`,
		`[{"name":"a","path":"/a"},{"name":"a","path":"/a"}]`,
		`[{"name":"a","path":"/a/.."}]`,
		`[{"name":"..","path":"/.."}]`,
		`[{"name":"a","path":"/a\u0000"}]`,
		`[{"name":"ünï","path":"/ünï/☃"}]`,
		`[{"name":"` + strings.Repeat("n", 300) + `","path":"/` + strings.Repeat("p", 300) + `"}]`,
		`[{"name":"a","path":"/a","x":{"y":[1,2,{"z":null}]}}]`,
		`[{"NAME":"a","Path":"/a"}]`,
		`[{"name":"a","path":"/a","reservedPercent":1e308,"reservedBytes":-9223372036854775808}]`,
		`[{"name":"a","path":"/a","reservedBytes":9223372036854775808}]`,
		`[{"name":"a","name":"b","path":"/a"}]`,
		`[[[[[[[[[[]]]]]]]]]]`,
		`[null]`, `null`, `[]`, `{}`, `""`, ``, `[`, "\xff\xfe",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned both a set and %v", err)
			}
			assertAllFieldErrors(t, err)
			return
		}
		pools := s.All()
		// A parsed set must be valid by construction, and survive a round
		// trip through JSON (what the operator writes, the driver reads).
		again, err := NewSet(pools)
		if err != nil {
			t.Fatalf("NewSet rejected what Parse accepted: %v\npools: %+v", err, pools)
		}
		out, err := json.Marshal(pools)
		if err != nil {
			t.Fatal(err)
		}
		reparsed, err := Parse(out)
		if err != nil || !reflect.DeepEqual(reparsed.All(), again.All()) {
			t.Fatalf("round trip of %s: %+v, %v", out, reparsed, err)
		}
		for _, p := range pools {
			if !filepath.IsAbs(p.Path) || filepath.Clean(p.Path) != p.Path || p.Path == "/" || p.Name == "" {
				t.Fatalf("invalid pool accepted: %+v", p)
			}
			if got, err := s.Select(p.Name); err != nil || got != p {
				t.Fatalf("Select(%q) = %+v, %v", p.Name, got, err)
			}
		}
		if _, err := s.Select(""); err != nil {
			assertAllFieldErrors(t, err)
		}
	})
}

func assertAllFieldErrors(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *fieldrule.FieldError
		if !errors.As(e, &fe) || fe.Field == "" || fe.Reason == "" {
			t.Fatalf("not a complete *FieldError: %T %v", e, e)
		}
	}
}

func FuzzResolveIn(f *testing.F) {
	for _, seed := range []string{
		"pvc-1", "real", "file", "escape", "etc", "up", "relup", "inside", "insideabs", "self",
		"dangling", "loop", "chain", "..", ".", "", "/", "a/../..", "../outside", "./real",
		"real/..", "real/../../outside", "a\x00b", "\x00", "é", "\u202e", "..\\..", "%2e%2e",
		"lost+found", "csi", " ", "a\nb", strings.Repeat("a", 255), strings.Repeat("a", 300),
		strings.Repeat("../", 100),
	} {
		f.Add(seed)
	}
	root, outside := symlinkRoot(f)
	linkedRoot := filepath.Join(filepath.Dir(root), "linked-pool")
	if err := os.Symlink(root, linkedRoot); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for _, r := range []string{root, linkedRoot} {
			got, err := ResolveIn(r, id)
			if err != nil {
				assertAllFieldErrors(t, err)
				continue
			}
			rel, relErr := filepath.Rel(r, got)
			if relErr != nil || rel != id || rel == ".." || strings.HasPrefix(rel, "../") || strings.ContainsRune(rel, filepath.Separator) {
				t.Fatalf("ResolveIn(%q, %q) = %q: not one entry below the root (rel %q, %v)", r, id, got, rel, relErr)
			}
			fi, err := os.Lstat(got)
			if err != nil {
				continue // not there yet: the caller creates it
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				t.Fatalf("ResolveIn(%q, %q) = %q, a symbolic link", r, id, got)
			}
			real, err := filepath.EvalSymlinks(got)
			if err != nil || filepath.Dir(real) != root || strings.HasPrefix(real, outside) {
				t.Fatalf("ResolveIn(%q, %q) = %q, which resolves to %q (%v)", r, id, got, real, err)
			}
		}
	})
}
