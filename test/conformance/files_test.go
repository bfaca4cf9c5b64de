package conformance

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func TestCheckedInDriverFileIsValid(t *testing.T) {
	if err := CheckDriverFile(checkout(t), DriverFile); err != nil {
		t.Fatal(err)
	}
}

func TestCheckedInSkipListIsValid(t *testing.T) {
	skips, err := LoadSkips(filepath.Join(checkout(t), SkippedFile))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(SkipRegexp(skips))
	// Names as the suite prints them.
	for name, skipped := range map[string]bool{
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (immediate binding)] topology should provision a volume and schedule a pod with AllowedTopologies":                                                                                                                                true,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] volumeMode should not mount / map unused volumes in a pod [LinuxOnly]":                                                                                                                                              false,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] [Serial] volume-lifecycle-performance should provision volumes at scale within performance constraints":                                                                                                             true,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (delayed binding)] topology should provision a volume and schedule a pod with AllowedTopologies":                                                                                                                                  false,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] subPath should support existing directory":                                                                                                                                                                          false,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Pre-provisioned Snapshot (retain policy)] snapshottable [Feature:VolumeSnapshotDataSource] volume snapshot controller  should check snapshot fields, check restore correctly works after modifying source data, check deletion (persistent)": true,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] provisioning should provision correct filesystem size when restoring snapshot to larger size pvc [Feature:VolumeSnapshotDataSource]":                                                                                true,
		"External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic Snapshot (delete policy)] snapshottable [Feature:VolumeSnapshotDataSource] volume snapshot controller  should check snapshot fields, check restore correctly works after modifying source data, check deletion (persistent)":         false,
	} {
		if got := re.MatchString(name); got != skipped {
			t.Errorf("skip %v, want %v: %s", got, skipped, name)
		}
	}
}

// writeFiles writes a checkout with a driver file and a StorageClass.
func writeFiles(t *testing.T, driver, sc string) string {
	t.Helper()
	root := t.TempDir()
	for rel, data := range map[string]string{DriverFile: driver, "test/conformance/storageclass.yaml": sc} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const goodSC = `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: x}
provisioner: ` + contract.DriverName + `
parameters: {` + contract.ParamStoragePool + `: local}
volumeBindingMode: WaitForFirstConsumer
`

const goodDriver = `StorageClass: {FromFile: test/conformance/storageclass.yaml}
DriverInfo:
  Name: ` + contract.DriverName + `
  TopologyKeys: [` + contract.TopologyKey + `]
  Capabilities: {persistence: true}
InlineVolumes: [{Attributes: {` + contract.ParamStoragePool + `: fast}}]
Timeouts: {claimProvision: 1m}
`

func TestCheckDriverFileAcceptsAMinimalFile(t *testing.T) {
	if err := CheckDriverFile(writeFiles(t, goodDriver, goodSC), DriverFile); err != nil {
		t.Fatal(err)
	}
}

func TestCheckDriverFileNamesEveryProblem(t *testing.T) {
	for name, tc := range map[string]struct {
		driver, sc string
		want       []string
	}{
		"unknown key": {
			driver: strings.Replace(goodDriver, "Timeouts:", "Timeout:", 1), sc: goodSC,
			want: []string{`unknown field "Timeout"`},
		},
		"key in the wrong case": {
			driver: strings.Replace(goodDriver, "StorageClass:", "storageClass:", 1), sc: goodSC,
			want: []string{`storageClass`},
		},
		"unknown capability": {
			driver: strings.Replace(goodDriver, "persistence: true", "persistenceX: true", 1), sc: goodSC,
			want: []string{`DriverInfo.Capabilities: "persistenceX" is not a capability`},
		},
		"driver, topology, pool, timeout": {
			driver: strings.NewReplacer("Name: "+contract.DriverName, "Name: hostpath.csi.k8s.io",
				"["+contract.TopologyKey+"]", "[kubernetes.io/hostname]", contract.ParamStoragePool+": fast", contract.ParamStoragePool+": nvme",
				"1m", "one minute").Replace(goodDriver),
			sc: goodSC,
			want: []string{`DriverInfo.Name: "hostpath.csi.k8s.io"`, `DriverInfo.TopologyKeys: ["kubernetes.io/hostname"]`,
				`InlineVolumes[0].Attributes.` + contract.ParamStoragePool + `: "nvme"`, `Timeouts.claimProvision: time: invalid duration`},
		},
		"immediate storage class in another pool": {
			driver: goodDriver,
			sc:     strings.NewReplacer("WaitForFirstConsumer", "Immediate", contract.ParamStoragePool+": local", contract.ParamStoragePool+": nvme").Replace(goodSC),
			want:   []string{"volumeBindingMode: want WaitForFirstConsumer", `parameters.` + contract.ParamStoragePool + ` "nvme"`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckDriverFile(writeFiles(t, tc.driver, tc.sc), DriverFile)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadSkipsRequiresKindAndReason(t *testing.T) {
	p := filepath.Join(t.TempDir(), "skipped.yaml")
	if err := os.WriteFile(p, []byte("- skip: 'a('\n  kind: flaky\n  reason: ''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSkips(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"[0].skip: error parsing regexp", `[0].kind "flaky": want by-design or machine`, "[0].reason: empty"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestFocusNarrowsWithinTheTier(t *testing.T) {
	in := "[sig-storage] External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] subPath should support existing directory"
	other := "[sig-storage] External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic PV (default fs)] volumes should store data"
	elsewhere := "[sig-storage] CSI mock volume subPath should work"
	for narrow, want := range map[string][3]bool{
		"":                       {true, true, false},
		"subPath":                {true, false, false},
		"subPath|volumes should": {true, true, false},
	} {
		re := regexp.MustCompile(focus(narrow))
		got := [3]bool{re.MatchString(in), re.MatchString(other), re.MatchString(elsewhere)}
		if got != want {
			t.Errorf("focus(%q) matches %v, want %v", narrow, got, want)
		}
	}
}

// TestOnlyTheSelectedFeaturesRun: the snapshot tests ([Feature:
// VolumeSnapshotDataSource]) are selected, every other feature's tests
// (one that shares a prefix included) are skipped.
func TestOnlyTheSelectedFeaturesRun(t *testing.T) {
	re := regexp.MustCompile(SkipRegexp(nil))
	prefix := "External Storage [Driver: " + contract.DriverName + "] [Testpattern: Dynamic Snapshot (delete policy)] "
	for name, skipped := range map[string]bool{
		prefix + "snapshottable[Feature:VolumeSnapshotDataSource] volume snapshot controller should check snapshot fields": false,
		prefix + "snapshottable[Feature:VolumeSnapshotDataSourceX] volume snapshot controller":                             true,
		prefix + "snapshottable[Feature:VolumeSnapshot] volume snapshot controller":                                        true,
		prefix + "volumegroupsnapshottable[Feature:volumegroupsnapshot] should create snapshots":                           true,
		prefix + "[Feature:VolumeGroupSnapshotDataSource] should create snapshots":                                         true,
		prefix + "[Feature:Windows] volumes should store data":                                                             true,
		prefix + "provisioning should provision storage with snapshot data source [Feature:VolumeSnapshotDataSource]":      false,
	} {
		if got := re.MatchString(name); got != skipped {
			t.Errorf("skip %v, want %v: %s", got, skipped, name)
		}
	}
	if two := regexp.MustCompile(otherFeature([]string{"Ab", "Ac"})); two.MatchString("[Feature:Ab]") || two.MatchString("[Feature:Ac]") ||
		!two.MatchString("[Feature:Ad]") || !two.MatchString("[Feature:Abc]") || !two.MatchString("[Feature:A]") {
		t.Errorf("otherFeature(Ab, Ac) = %s: does not rule out exactly Ab and Ac", two)
	}
}
