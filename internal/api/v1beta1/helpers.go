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
