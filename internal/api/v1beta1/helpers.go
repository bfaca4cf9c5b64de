package v1beta1

// FeatureSnapshotting is the feature gate that adds csi-snapshotter.
const FeatureSnapshotting = "Snapshotting"

// HasFeature reports whether the named feature gate is on.
func (s *HostPathProvisionerSpec) HasFeature(name string) bool {
	for _, f := range s.FeatureGates {
		if f == name {
			return true
		}
	}
	return false
}

// CrossNodeClonesOn reports whether clones and restores may land on
// another node than their source's: spec.crossNodeClones absent or true.
// On by default, so that a CR written for upstream's operator (which has
// no such field) gets them.
func (s *HostPathProvisionerSpec) CrossNodeClonesOn() bool {
	return s.CrossNodeClones == nil || *s.CrossNodeClones
}

// IsLegacy reports whether the CR asks for the legacy provisioner.
func (s *HostPathProvisionerSpec) IsLegacy() bool { return s.PathConfig != nil }

// FindCondition returns the condition of the given type, or nil.
func (st *HostPathProvisionerStatus) FindCondition(t ConditionType) *Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}
