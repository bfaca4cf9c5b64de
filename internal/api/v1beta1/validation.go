package v1beta1

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits the CRD's schema also enforces; kept here so the webhook and the
// operator report the same rule when they run against an older CRD.
const (
	MaxPoolNameLength = 50
	MaxPathLength     = 255
)

// Usage is what already lives on the cluster for a CR, counted by the
// caller (the webhook lists PVs); validation itself stays a pure function.
type Usage struct {
	// PoolVolumes is the number of CSI PVs per pool name.
	PoolVolumes map[string]int
	// LegacyVolumes is the number of PVs of the legacy provisioner.
	LegacyVolumes int
}

// ValidateSpec returns every problem with a spec at once, each naming its
// field, in the order of the fields.
func ValidateSpec(spec *HostPathProvisionerSpec) field.ErrorList {
	root := field.NewPath("spec")
	var errs field.ErrorList
	hasPools := len(spec.StoragePools) > 0
	switch {
	case spec.PathConfig != nil && hasPools:
		errs = append(errs, field.Forbidden(root.Child("pathConfig"),
			"exactly one of spec.pathConfig and spec.storagePools must be set, not both"))
	case spec.PathConfig == nil && !hasPools:
		errs = append(errs, field.Required(root.Child("storagePools"),
			"exactly one of spec.pathConfig and spec.storagePools must be set"))
	}
	if spec.PathConfig != nil {
		errs = append(errs, validatePath(root.Child("pathConfig", "path"), spec.PathConfig.Path)...)
	}
	errs = append(errs, validatePools(root.Child("storagePools"), spec.StoragePools)...)
	for i, g := range spec.FeatureGates {
		if g != FeatureSnapshotting {
			errs = append(errs, field.NotSupported(root.Child("featureGates").Index(i), g, []string{FeatureSnapshotting}))
		}
	}
	return errs
}

func validatePools(fp *field.Path, pools []StoragePool) field.ErrorList {
	var errs field.ErrorList
	names := map[string]int{}
	for i := range pools {
		p := &pools[i]
		ip := fp.Index(i)
		errs = append(errs, validatePoolName(ip.Child("name"), p.Name)...)
		if j, dup := names[p.Name]; dup && p.Name != "" {
			errs = append(errs, field.Duplicate(ip.Child("name"), fmt.Sprintf("%s (also storagePools[%d])", p.Name, j)))
		} else {
			names[p.Name] = i
		}
		errs = append(errs, validatePath(ip.Child("path"), p.Path)...)
		if p.SnapshotPath != "" {
			errs = append(errs, validatePath(ip.Child("snapshotPath"), p.SnapshotPath)...)
		}
		if p.PVCTemplate != nil {
			errs = append(errs, validatePVCTemplate(ip.Child("pvcTemplate"), p.PVCTemplate)...)
		}
		if p.EnforceSize && p.PVCTemplate != nil && slices.Contains(p.PVCTemplate.AccessModes, corev1.ReadWriteMany) {
			errs = append(errs, field.Invalid(ip.Child("enforceSize"), true,
				"a shared (ReadWriteMany) pool cannot enforce sizes: project quotas belong to a node's local XFS or ext4 filesystem, and every node would hand out its own project IDs"))
		}
	}
	// Two pools in one directory, or one inside the other, would count and
	// clean each other's volumes.
	for i := range pools {
		for j := range pools {
			if i == j || !isAbsClean(pools[i].Path) || !isAbsClean(pools[j].Path) {
				continue
			}
			a, b := pools[i].Path, pools[j].Path
			switch {
			case a == b && i > j:
				errs = append(errs, field.Duplicate(fp.Index(i).Child("path"),
					fmt.Sprintf("%s (also storagePools[%d].path)", a, j)))
			case a != b && strings.HasPrefix(a, b+"/"):
				errs = append(errs, field.Invalid(fp.Index(i).Child("path"), a,
					fmt.Sprintf("is inside storagePools[%d].path %s: pool paths must not be nested", j, b)))
			}
		}
	}
	return errs
}

func validatePoolName(fp *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fp, "a pool needs a name")}
	}
	var errs field.ErrorList
	if len(name) > MaxPoolNameLength {
		errs = append(errs, field.TooLong(fp, name, MaxPoolNameLength))
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		if !strings.Contains(msg, "must be no more than") { // length reported above
			errs = append(errs, field.Invalid(fp, name, msg))
		}
	}
	return errs
}

func isAbsClean(p string) bool {
	return p != "/" && path.IsAbs(p) && path.Clean(p) == p && len(p) <= MaxPathLength
}

func validatePath(fp *field.Path, p string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(fp, "an absolute path is required")}
	case !path.IsAbs(p):
		return field.ErrorList{field.Invalid(fp, p, "must be an absolute path")}
	case p == "/":
		return field.ErrorList{field.Invalid(fp, p, "must not be the root directory")}
	}
	var errs field.ErrorList
	if c := path.Clean(p); c != p {
		errs = append(errs, field.Invalid(fp, p, fmt.Sprintf("must be a clean path (%s)", c)))
	}
	if len(p) > MaxPathLength {
		errs = append(errs, field.TooLong(fp, p, MaxPathLength))
	}
	return errs
}

// validatePVCTemplate refuses templates the operator could not turn into
// a working pool: what the API server would refuse on every PVC, and a
// ReadWriteMany block device, which hpp-mounter would format with XFS and
// mount on every node at once (XFS is not a cluster filesystem: that
// corrupts it).
func validatePVCTemplate(fp *field.Path, t *corev1.PersistentVolumeClaimSpec) field.ErrorList {
	var errs field.ErrorList
	if len(t.AccessModes) == 0 {
		errs = append(errs, field.Required(fp.Child("accessModes"),
			"ReadWriteOnce (a PVC per node) or ReadWriteMany (one PVC shared by the nodes)"))
	}
	if _, ok := t.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(fp.Child("resources", "requests", "storage"), "the size of each pool PVC"))
	}
	if t.VolumeMode != nil && *t.VolumeMode == corev1.PersistentVolumeBlock && slices.Contains(t.AccessModes, corev1.ReadWriteMany) {
		errs = append(errs, field.Invalid(fp.Child("volumeMode"), "Block",
			"a ReadWriteMany Block PVC would get one XFS filesystem mounted on every node at once, which corrupts it: use ReadWriteOnce (a PVC per node) or a Filesystem ReadWriteMany PVC (NFS, CephFS)"))
	}
	return errs
}
