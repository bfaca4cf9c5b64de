package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// upstream holds the contract's values as the KubeVirt hostpath provisioner
// and its operator spell them (and as clusters that ran them store them),
// and hpp's own names as clusters that ran hpp store them. This is the one
// place outside contract.go where they are written out.
var upstream = map[string]struct{ got, want string }{
	"DriverName":              {DriverName, "kubevirt.io.hostpath-provisioner"},
	"LegacyProvisionerName":   {LegacyProvisionerName, "kubevirt.io/hostpath-provisioner"},
	"TopologyKey":             {TopologyKey, "topology.hostpath.csi/node"},
	"ParamStoragePool":        {ParamStoragePool, "storagePool"},
	"ParamOverlayCSI":         {ParamOverlayCSI, "overlayCSI"},
	"DefaultPool":             {DefaultPool, "legacy"},
	"VolumeContextLayout":     {VolumeContextLayout, "hostpath.csi/layout"},
	"LayoutLegacy":            {LayoutLegacy, "legacy"},
	"AnnProvisionOnNode":      {AnnProvisionOnNode, "kubevirt.io/provisionOnNode"},
	"AnnSelectedNode":         {AnnSelectedNode, "volume.kubernetes.io/selected-node"},
	"AnnIdentity":             {AnnIdentity, "hostPathProvisionerIdentity"},
	"AnnProvisionedBy":        {AnnProvisionedBy, "pv.kubernetes.io/provisioned-by"},
	"AnnMigratedFrom":         {AnnMigratedFrom, "hostpath.csi/migrated-from"},
	"AnnMigratedFromPath":     {AnnMigratedFromPath, "hostpath.csi/migrated-from-path"},
	"AnnMigratedFromUID":      {AnnMigratedFromUID, "hostpath.csi/migrated-from-uid"},
	"AnnRestoredFrom":         {AnnRestoredFrom, "hostpath.csi/restored-from-uid"},
	"AnnRebind":               {AnnRebind, "hostpath.csi/rebound-to"},
	"FinalizerMigration":      {FinalizerMigration, "hostpath.csi/migration"},
	"AnnCounterpartOf":        {AnnCounterpartOf, "hostpath.csi/counterpart-of"},
	"VolumeContextPoolID":     {VolumeContextPoolID, "hostpath.csi/pool-id"},
	"AnnReleaseAfterNodeLoss": {AnnReleaseAfterNodeLoss, "hostpath.csi/release-after-node-loss"},
	"PoolLabel":               {PoolLabel, "kubevirt.io.hostpath-provisioner/storagePool"},
}

func TestUpstreamValues(t *testing.T) {
	for name, v := range upstream {
		if v.got != v.want {
			t.Errorf("contract.%s = %q; upstream's value is %q (stored in clusters: never change it)", name, v.got, v.want)
		}
	}
}

// unguarded values are too plain a word for a literal check: "legacy" is
// also a subtest's, a directory's and a JSON field's name. Code that means
// the pool or the layout uses DefaultPool or LayoutLegacy all the same.
var unguarded = map[string]bool{"DefaultPool": true, "LayoutLegacy": true}

// TestNoCopies walks every .go file of the repository (tests and fixtures
// of upstream's objects included: they take the names from here too, and
// TestUpstreamValues is where upstream's spelling is asserted) and fails on
// a string literal that is one of the contract's values: a copy that could
// drift from this package without any test but an end-to-end one noticing.
func TestNoCopies(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found above the contract package: %v", err)
	}
	guarded := map[string]string{}
	for name, v := range upstream {
		if !unguarded[name] {
			guarded[v.want] = name
		}
	}
	self := filepath.Join(root, "internal", "contract")
	var found []string
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == self || (path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output" || d.Name() == "bin")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if name, ok := guarded[s]; ok {
				p := fset.Position(lit.Pos())
				found = append(found, rel+":"+strconv.Itoa(p.Line)+": "+lit.Value+" (use contract."+name+")")
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}
