package contract

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// unguarded values are too plain a word for a literal check: "legacy" is
// also a subtest's, a directory's and a JSON field's name. Code that means
// the pool or the layout uses DefaultPool or LayoutLegacy all the same.
// They are left out of every search here, whole or inside a string.
var unguarded = map[string]bool{"DefaultPool": true, "LayoutLegacy": true}

// guarded maps each searched value to its constant's name.
func guarded() map[string]string {
	g := map[string]string{}
	for name, v := range upstream {
		if !unguarded[name] {
			g[v.want] = name
		}
	}
	return g
}

// nameChar is a character that continues a name: a value found with one
// of these right before or after it is part of another name
// ("storagePools", "hostpath.csi/migrated-from-uid"), not a copy of it.
func nameChar(c byte) bool {
	return c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// occurrence is a contract value found at an offset of a string.
type occurrence struct {
	at    int
	value string
}

// find returns the contract values that s contains as whole names (see
// nameChar), longest first where two overlap: PoolLabel, not the
// DriverName it starts with.
func find(s string, values map[string]string) []occurrence {
	var all []occurrence
	for v := range values {
		for from := 0; ; {
			i := strings.Index(s[from:], v)
			if i < 0 {
				break
			}
			at, end := from+i, from+i+len(v)
			if (at == 0 || !nameChar(s[at-1])) && (end == len(s) || !nameChar(s[end])) {
				all = append(all, occurrence{at, v})
			}
			from = at + 1
		}
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i].value) > len(all[j].value) })
	var kept []occurrence
	for _, o := range all {
		overlaps := false
		for _, k := range kept {
			if o.at < k.at+len(k.value) && k.at < o.at+len(o.value) {
				overlaps = true
			}
		}
		if !overlaps {
			kept = append(kept, o)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].at < kept[j].at })
	return kept
}

// allowed: a reason when path (slash-separated, from the repository's
// root) is under one of the entries of list.
func allowed(list map[string]string, path string) (string, bool) {
	for prefix, reason := range list {
		if path == prefix || strings.HasPrefix(path, strings.TrimSuffix(prefix, "/")+"/") {
			return reason, true
		}
	}
	return "", false
}

// repoRoot is the repository's root, two directories above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found above the contract package: %v", err)
	}
	return root
}

// skipDir: directories no scan enters (hidden ones, build output).
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "_output" || name == "bin"
}

func TestFind(t *testing.T) {
	g := guarded()
	for s, want := range map[string][]string{
		"--key=topology.hostpath.csi/node":                 {TopologyKey},
		"kubevirt.io.hostpath-provisioner/storagePool=x":   {PoolLabel},
		"/var/lib/kubelet/plugins/" + DriverName + "/csi":  {DriverName},
		"spec.storagePools":                                nil,
		"hostpath.csi/migrated-from-uid":                   {AnnMigratedFromUID},
		"parameters.storagePool, " + AnnSelectedNode + "=": {ParamStoragePool, AnnSelectedNode},
		"a legacy pool":                                    nil,
	} {
		var got []string
		for _, o := range find(s, g) {
			got = append(got, o.value)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("find(%q) = %q, want %q", s, got, want)
		}
	}
}
