package v1beta1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// upstreamRan is a CR that upstream's CRD and webhook accept (names of at
// most 50 bytes, any characters; unknown gates; nested paths, compared
// once cleaned) and hpp refuses in a new CR.
func upstreamRan() *HostPathProvisionerSpec {
	return &HostPathProvisionerSpec{
		StoragePools: []StoragePool{
			{Name: "Fast_Pool", Path: "/var/hpp/"},
			{Name: "inner", Path: "/var/hpp/inner"},
		},
		FeatureGates: []string{"SomeUpstreamGate"},
	}
}

func fields(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+string(e.Type))
	}
	return out
}

// The operator keeps running a CR upstream accepted: its hpp-only problems
// are strict (a warning), none blocks.
func TestValidateStoredSplitsUpstreamAcceptedRules(t *testing.T) {
	blocking, strict := ValidateStored(upstreamRan())
	if len(blocking) != 0 {
		t.Errorf("blocking %v; want none for a CR upstream's CRD and webhook accept", blocking)
	}
	want := []string{
		"spec.storagePools[0].name: FieldValueInvalid",
		"spec.storagePools[1].path: FieldValueInvalid",
		"spec.featureGates[0]: FieldValueNotSupported",
	}
	if got := fields(strict); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("strict:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Upstream's own rules (and what no pod runs) still block.
	bad := pools(StoragePool{Name: "a", Path: "/x"}, StoragePool{Name: "a", Path: "/x"}, StoragePool{Name: "b", Path: "rel"})
	blocking, _ = ValidateStored(bad)
	want = []string{
		"spec.storagePools[1].name: FieldValueDuplicate",
		"spec.storagePools[2].path: FieldValueInvalid",
		"spec.storagePools[1].path: FieldValueDuplicate",
	}
	if got := fields(blocking); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("blocking:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An update of an upstream CR passes when it leaves the offending values
// alone, wherever the pools move in the list; a change brings hpp's rules
// to what it changes.
func TestValidateUpdateRatchets(t *testing.T) {
	old := upstreamRan()
	for name, c := range map[string]struct {
		edit func(*HostPathProvisionerSpec)
		want []string
	}{
		"workload only": {edit: func(s *HostPathProvisionerSpec) { s.Workload.NodeSelector = map[string]string{"a": "b"} }},
		"a pool added in front": {edit: func(s *HostPathProvisionerSpec) {
			s.StoragePools = append([]StoragePool{{Name: "new", Path: "/mnt/new"}}, s.StoragePools...)
		}},
		"a known gate added": {edit: func(s *HostPathProvisionerSpec) { s.FeatureGates = append(s.FeatureGates, FeatureSnapshotting) }},
		"a bad new pool": {
			edit: func(s *HostPathProvisionerSpec) {
				s.StoragePools = append(s.StoragePools, StoragePool{Name: "New_Pool", Path: "/"})
			},
			want: []string{"spec.storagePools[2].name: FieldValueInvalid", "spec.storagePools[2].path: FieldValueInvalid"},
		},
		"the bad pool's path changed": {
			edit: func(s *HostPathProvisionerSpec) { s.StoragePools[0].Path = "/srv/hpp" },
			// Its name is checked again: the pool changed.
			want: []string{"spec.storagePools[0].name: FieldValueInvalid"},
		},
		"a pool now holds another": {
			edit: func(s *HostPathProvisionerSpec) {
				s.StoragePools = append(s.StoragePools, StoragePool{Name: "outer", Path: "/var"})
			},
			want: []string{"spec.storagePools[0].path: FieldValueInvalid", "spec.storagePools[1].path: FieldValueInvalid"},
		},
		"an unknown gate added": {
			edit: func(s *HostPathProvisionerSpec) { s.FeatureGates = append(s.FeatureGates, "Other") },
			want: []string{"spec.featureGates[1]: FieldValueNotSupported"},
		},
	} {
		updated := old.DeepCopy()
		c.edit(updated)
		got := fields(ValidateUpdate(old, updated, Usage{}))
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got  %v\n want %v", name, got, c.want)
		}
	}
}
