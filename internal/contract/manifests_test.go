package contract

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// manifestAllowed: where YAML and JSON may carry the contract's values,
// and why. A manifest cannot import a constant, so here the question is
// not "copy or constant" but "on purpose, and spelled right": a file that
// holds a value outside these places fails (say here why it needs it),
// and TestManifestSpelling holds every scanned file to the exact names.
var manifestAllowed = map[string]string{
	"deploy": "the product's manifests: kubectl applies them, so they spell the names. The generated.yaml " +
		"files are rendered by cmd/hpp-operator/render (which takes them from this package) and kept equal to it " +
		"by `make generate` --check; the hand-written ones are held to the names by TestManifestSpelling",
	"cmd/hpp-operator/controller/hostpathprovisioner/testdata/upstream": "upstream's operator's own rendered objects, " +
		"copied unchanged: the operator's tests compare hpp's render with them, upstream's spelling on purpose",
	"test/conformance": "the Kubernetes storage suite's driver and StorageClass files: the suite reads the " +
		"driver's name and topology key from them (files.go checks them against the real node)",
}

// manifests returns the YAML and JSON files under deploy/, under every
// testdata directory and under test/ (the tiers' input files), relative
// to root and slash-separated, with their contents.
func manifests(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		switch filepath.Ext(rel) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if !strings.HasPrefix(rel, "deploy/") && !strings.HasPrefix(rel, "test/") && !strings.Contains(rel, "/testdata/") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no YAML or JSON found under deploy/, test/ or testdata/: has the layout changed?")
	}
	return files
}

// TestNoManifestCopies fails on a YAML or JSON file that holds a
// contract value (whole, or inside a longer string) outside the places
// manifestAllowed lists.
func TestNoManifestCopies(t *testing.T) {
	values := guarded()
	var found []string
	for rel, data := range manifests(t, repoRoot(t)) {
		if _, ok := allowed(manifestAllowed, rel); ok {
			continue
		}
		for _, o := range find(data, values) {
			line := 1 + strings.Count(data[:o.at], "\n")
			found = append(found, rel+":"+itoa(line)+": holds "+o.value+
				" (a copy of contract."+values[o.value]+": generate the file, or list it in manifestAllowed with the reason)")
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}

// TestManifestSpelling is the drift check of the manifests that must spell
// the names: in every scanned file, allowed or not, a name one or two
// edits away from a contract value ("kubevirt.io.hostpath-provisoner",
// "hostpath.csi/layouts") is a misspelt copy. Only values of 16
// characters or more are compared: shorter ones have real neighbours
// ("storagePools", the CRD's field).
func TestManifestSpelling(t *testing.T) {
	values := guarded()
	var found []string
	for rel, data := range manifests(t, repoRoot(t)) {
		for _, m := range nearMisses(data, values) {
			found = append(found, rel+": "+m)
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}
