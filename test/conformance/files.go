package conformance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Files of this directory, relative to the checkout (the suite's
// --repo-root).
const (
	DriverFile  = "test/conformance/driver.yaml"
	SkippedFile = "test/conformance/skipped.yaml"
)

// knownCapabilities are the storageframework.Capability values of the
// pinned e2e suite (test/e2e/storage/framework/testdriver.go, v1.37.1).
// The suite ignores a key it does not know, so a typo would silently turn
// a test off; checking against this list catches it.
var knownCapabilities = []string{
	"persistence", "block", "fsGroup", "volumeMountGroup", "exec", "snapshotDataSource",
	"snapshotMetadata", "groupSnapshot", "pvcDataSource", "multipods", "RWX", "controllerExpansion",
	"nodeExpansion", "offlineExpansion", "onlineExpansion", "volumeLimits", "singleNodeVolume",
	"topology", "capacity", "FSResizeFromSourceNotSupported", "readWriteOncePod",
	"multiplePVsSameID", "capReadOnlyMany", "seLinuxMount",
}

// classSource is how the suite gets a StorageClass or snapshot class.
type classSource struct {
	FromName              bool   `json:"FromName,omitempty"`
	FromFile              string `json:"FromFile,omitempty"`
	FromExistingClassName string `json:"FromExistingClassName,omitempty"`
}

// driverFile mirrors the suite's driverDefinition (external.go) as far as
// hpp uses it; decoding is strict and case-sensitive, as the suite's own
// decoder is case-sensitive but ignores unknown keys.
type driverFile struct {
	StorageClass       classSource  `json:"StorageClass"`
	SnapshotClass      *classSource `json:"SnapshotClass,omitempty"`
	GroupSnapshotClass *classSource `json:"GroupSnapshotClass,omitempty"`
	DriverInfo         struct {
		Name               string `json:"Name"`
		SupportedSizeRange struct {
			Min string `json:"Min,omitempty"`
			Max string `json:"Max,omitempty"`
		} `json:"SupportedSizeRange"`
		SupportedFsType      []string        `json:"SupportedFsType,omitempty"`
		SupportedMountOption []string        `json:"SupportedMountOption,omitempty"`
		TopologyKeys         []string        `json:"TopologyKeys"`
		NumAllowedTopologies int             `json:"NumAllowedTopologies"`
		Capabilities         map[string]bool `json:"Capabilities"`
	} `json:"DriverInfo"`
	InlineVolumes []struct {
		Attributes map[string]string `json:"Attributes"`
		Shared     bool              `json:"Shared,omitempty"`
		ReadOnly   bool              `json:"ReadOnly,omitempty"`
	} `json:"InlineVolumes"`
	Timeouts map[string]string `json:"Timeouts"`
}

// pools are the pools test/e2e/kit's Setup gives the real node: the only pool
// names the driver file may use.
var pools = []string{kit.PoolLocal, kit.PoolFast}

// CheckDriverFile loads the driver file (relative to root) and the
// StorageClass it names, and reports every problem at once, each naming
// its field: unknown keys and capabilities, a driver name or topology key
// other than hpp-csi's, a StorageClass that is not WaitForFirstConsumer
// or names an unknown pool, inline volumes without a known pool, timeouts
// that are not durations.
func CheckDriverFile(root, rel string) error {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return fmt.Errorf("driver file: %w", err)
	}
	var d driverFile
	if err := strictYAML(data, &d); err != nil {
		return fmt.Errorf("driver file %s: %w", rel, err)
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("driver file %s: %s: %s", rel, field, fmt.Sprintf(format, args...)))
	}
	if d.DriverInfo.Name != contract.DriverName {
		bad("DriverInfo.Name", "%q, want hpp-csi's %q", d.DriverInfo.Name, contract.DriverName)
	}
	if !slices.Equal(d.DriverInfo.TopologyKeys, []string{contract.TopologyKey}) {
		bad("DriverInfo.TopologyKeys", "%q, want [%s]", d.DriverInfo.TopologyKeys, contract.TopologyKey)
	}
	for name := range d.DriverInfo.Capabilities {
		if !slices.Contains(knownCapabilities, name) {
			bad("DriverInfo.Capabilities", "%q is not a capability of the pinned suite (typo? known: %s)", name, strings.Join(knownCapabilities, ", "))
		}
	}
	if d.StorageClass.FromFile == "" {
		bad("StorageClass.FromFile", "empty: hpp-csi needs a WaitForFirstConsumer class with a "+contract.ParamStoragePool)
	} else if err := checkStorageClass(root, d.StorageClass.FromFile); err != nil {
		bad("StorageClass.FromFile", "%v", err)
	}
	for i, v := range d.InlineVolumes {
		if p := v.Attributes[contract.ParamStoragePool]; !slices.Contains(pools, p) {
			bad(fmt.Sprintf("InlineVolumes[%d].Attributes."+contract.ParamStoragePool, i), "%q, want one of the real node's pools %q", p, pools)
		}
	}
	for k, v := range d.Timeouts {
		if _, err := time.ParseDuration(v); err != nil {
			bad("Timeouts."+k, "%v", err)
		}
	}
	return errors.Join(errs...)
}

// checkStorageClass checks the StorageClass file the driver file names.
func checkStorageClass(root, rel string) error {
	if filepath.IsAbs(rel) {
		return fmt.Errorf("%q: must be relative to the checkout (the suite's --repo-root)", rel)
	}
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return err
	}
	var sc storagev1.StorageClass
	if err := strictYAML(data, &sc); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	var errs []error
	if sc.Provisioner != contract.DriverName {
		errs = append(errs, fmt.Errorf("%s provisioner %q, want %q", rel, sc.Provisioner, contract.DriverName))
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		errs = append(errs, fmt.Errorf("%s volumeBindingMode: want WaitForFirstConsumer (hpp-csi refuses Immediate)", rel))
	}
	if p := sc.Parameters[contract.ParamStoragePool]; !slices.Contains(pools, p) {
		errs = append(errs, fmt.Errorf("%s parameters."+contract.ParamStoragePool+" %q, want one of the real node's pools %q", rel, p, pools))
	}
	return errors.Join(errs...)
}

// strictYAML decodes YAML refusing unknown and duplicate keys and keys
// that differ from a field name only in case.
func strictYAML(data []byte, v any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// Skip is one entry of skipped.yaml: selected tests that do not run, and
// why.
type Skip struct {
	// Skip is a Go regular expression on the full test name.
	Skip string `json:"skip"`
	// Kind is "by-design" (hpp-csi refuses it on purpose) or "machine"
	// (this machine's cluster cannot run it).
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// LoadSkips reads and checks skipped.yaml: every entry needs a regular
// expression that compiles, a known kind and a reason.
func LoadSkips(path string) ([]Skip, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	var skips []Skip
	if err := strictYAML(data, &skips); err != nil {
		return nil, fmt.Errorf("skip list %s: %w", path, err)
	}
	var errs []error
	for i, s := range skips {
		if strings.TrimSpace(s.Skip) == "" {
			errs = append(errs, fmt.Errorf("skip list %s [%d].skip: empty", path, i))
		} else if _, err := regexp.Compile(s.Skip); err != nil {
			errs = append(errs, fmt.Errorf("skip list %s [%d].skip: %w", path, i, err))
		}
		if s.Kind != "by-design" && s.Kind != "machine" {
			errs = append(errs, fmt.Errorf("skip list %s [%d].kind %q: want by-design or machine", path, i, s.Kind))
		}
		if strings.TrimSpace(s.Reason) == "" {
			errs = append(errs, fmt.Errorf("skip list %s [%d].reason: empty; say why the test cannot apply", path, i))
		}
	}
	return skips, errors.Join(errs...)
}

// Focus and the tags skipped everywhere: tests that disrupt the cluster
// or need it alone ([Serial], which also cannot run beside the other
// process), and the optional features but those in Features.
const (
	Focus    = `External.Storage.*` + `kubevirt\.io\.hostpath-provisioner`
	baseSkip = `\[Disruptive\]|\[Serial\]`
)

// Features are the suite's [Feature:...] tags whose tests the tier runs:
// hpp-csi has the feature and the tier's cluster runs what it needs
// (snapshot-controller and csi-snapshotter for VolumeSnapshotDataSource).
// Every other feature's tests are skipped.
var Features = []string{"VolumeSnapshotDataSource"}

// otherFeature matches a [Feature:X] tag whose X is none of features. Go's
// regular expressions have no negative lookahead, so each name is ruled
// out character by character: the tag differs from it at some position,
// or goes on past it.
func otherFeature(features []string) string {
	if len(features) == 0 {
		return `\[Feature:`
	}
	var alts []string
	for i := 0; i <= longest(features); i++ {
		// The tags that agree with a feature on its first i characters
		// and differ at the next one.
		seen := map[string]bool{}
		for _, f := range features {
			name := f + "]"
			if i >= len(name) || seen[name[:i]] {
				continue
			}
			seen[name[:i]] = true
			var next []string
			for _, g := range features {
				if gn := g + "]"; i < len(gn) && gn[:i] == name[:i] {
					next = append(next, regexp.QuoteMeta(gn[i:i+1]))
				}
			}
			alts = append(alts, regexp.QuoteMeta(name[:i])+"[^"+strings.Join(next, "")+"]")
		}
	}
	return `\[Feature:(?:` + strings.Join(alts, "|") + `)`
}

func longest(words []string) int {
	n := 0
	for _, w := range words {
		n = max(n, len(w)+1)
	}
	return n
}

// SkipRegexp is the ginkgo --skip: the base tags, the features not
// selected and every entry of the skip list.
func SkipRegexp(skips []Skip) string {
	parts := []string{baseSkip, otherFeature(Features)}
	for _, s := range skips {
		parts = append(parts, "(?:"+s.Skip+")")
	}
	return strings.Join(parts, "|")
}
