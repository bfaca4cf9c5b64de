package v1beta1

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// Limits the CRD's schema also enforces; kept here so the webhook and the
// operator report the same rule when they run against an older CRD.
const (
	MaxPoolNameLength = 50
	MaxPathLength     = fieldrule.MaxPathLen
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
// field, in the order of the fields: every rule hpp has, for new CRs.
func ValidateSpec(spec *HostPathProvisionerSpec) field.ErrorList {
	return validate(spec).all
}

// ValidateStored splits a stored spec's problems into those the operator
// cannot run (blocking: upstream's own webhook rules, what no pod could
// run, and the data-safety rules) and those hpp refuses only in new CRs
// and changed fields (strict): a CR that upstream's operator accepted and
// ran keeps being reconciled, and the strict ones are reported as a
// warning condition.
func ValidateStored(spec *HostPathProvisionerSpec) (blocking, strict field.ErrorList) {
	f := validate(spec)
	return f.blocking, f.strict
}

// findings keeps every error in field order (all), and which rule kind
// raised it.
type findings struct {
	all, blocking, strict field.ErrorList
}

// block records an error of a rule upstream also had, or that nothing could
// run; tighten one that upstream's CRD and webhook accepted.
func (f *findings) block(errs ...*field.Error) {
	f.all = append(f.all, errs...)
	f.blocking = append(f.blocking, errs...)
}

func (f *findings) tighten(errs ...*field.Error) {
	f.all = append(f.all, errs...)
	f.strict = append(f.strict, errs...)
}

func validate(spec *HostPathProvisionerSpec) *findings {
	root := field.NewPath("spec")
	f := &findings{}
	hasPools := len(spec.StoragePools) > 0
	switch {
	case spec.PathConfig != nil && hasPools:
		f.block(field.Forbidden(root.Child("pathConfig"),
			"exactly one of spec.pathConfig and spec.storagePools must be set, not both"))
	case spec.PathConfig == nil && !hasPools:
		f.block(field.Required(root.Child("storagePools"),
			"exactly one of spec.pathConfig and spec.storagePools must be set"))
	}
	if spec.PathConfig != nil {
		validatePath(f, root.Child("pathConfig", "path"), spec.PathConfig.Path)
	}
	validatePools(f, root.Child("storagePools"), spec.StoragePools)
	// Upstream ignores gates it does not know.
	for i, g := range spec.FeatureGates {
		if g != FeatureSnapshotting {
			f.tighten(field.NotSupported(root.Child("featureGates").Index(i), g, []string{FeatureSnapshotting}))
		}
	}
	return f
}

func validatePools(f *findings, fp *field.Path, pools []StoragePool) {
	names := map[string]int{}
	// Paths cleaned (fieldrule.CheckPoolPath), compared below.
	clean := make([]string, len(pools))
	for i := range pools {
		p := &pools[i]
		ip := fp.Index(i)
		validatePoolName(f, ip.Child("name"), p.Name)
		if j, dup := names[p.Name]; dup && p.Name != "" {
			f.block(field.Duplicate(ip.Child("name"), fmt.Sprintf("%s (also storagePools[%d])", p.Name, j)))
		} else {
			names[p.Name] = i
		}
		clean[i] = validatePath(f, ip.Child("path"), p.Path)
		if p.SnapshotPath != "" {
			// hpp's own field: its rules hold for every CR that sets it.
			sf := &findings{}
			validatePath(sf, ip.Child("snapshotPath"), p.SnapshotPath)
			f.block(sf.all...)
		}
		if p.PVCTemplate != nil {
			validatePVCTemplate(f, ip.Child("pvcTemplate"), p.PVCTemplate)
		}
		if p.EnforceSize && p.PVCTemplate != nil && slices.Contains(p.PVCTemplate.AccessModes, corev1.ReadWriteMany) {
			// hpp's own field: refused on every CR that sets it so.
			f.block(field.Invalid(ip.Child("enforceSize"), true,
				"a shared (ReadWriteMany) pool cannot enforce sizes: project quotas belong to a node's local XFS or ext4 filesystem, and every node would hand out its own project IDs"))
		}
	}
	// Two pools in one directory would count and clean each other's
	// volumes (upstream's webhook refuses the same path twice too, and hpp
	// the same directory spelled twice); one inside the other is hpp's
	// rule. Paths are compared cleaned.
	for i := range pools {
		for j := range pools {
			a, b := clean[i], clean[j]
			if i == j || a == "" || b == "" {
				continue
			}
			switch {
			case a == b && i > j:
				dup := field.Duplicate(fp.Index(i).Child("path"),
					fmt.Sprintf("%s (also storagePools[%d].path)", pools[i].Path, j))
				if pools[i].Path == pools[j].Path {
					f.block(dup)
				} else {
					f.tighten(dup)
				}
			case a != b && strings.HasPrefix(a, b+"/"):
				f.tighten(field.Invalid(fp.Index(i).Child("path"), pools[i].Path,
					fmt.Sprintf("is inside storagePools[%d].path %s: pool paths must not be nested", j, pools[j].Path)))
			}
		}
	}
}

// validatePoolName: upstream's webhook requires a name of at most 50
// bytes; the DNS label rule is hpp's.
func validatePoolName(f *findings, fp *field.Path, name string) {
	if name == "" {
		f.block(field.Required(fp, "a pool needs a name"))
		return
	}
	if len(name) > MaxPoolNameLength {
		f.block(field.TooLong(fp, name, MaxPoolNameLength))
	}
	for _, msg := range validation.IsDNS1123Label(name) {
		if !strings.Contains(msg, "must be no more than") { // length reported above
			f.tighten(field.Invalid(fp, name, msg))
		}
	}
}

// validatePath applies the pool-path rule (fieldrule.CheckPoolPath, where
// the rule and the reasons for it are written) and words its verdict as
// field errors. Blocking: what upstream's webhook refuses (empty, longer
// than 255 bytes) and what no pod could run (relative, a NUL byte, a ".."
// element, which the API server refuses in a hostPath volume); the root
// directory is hpp's rule. A trailing '/' or other unclean spelling is
// accepted: hpp cleans it where it uses the path.
// validatePath records p's problem, if any, and returns p cleaned ("" when
// it has a problem).
func validatePath(f *findings, fp *field.Path, p string) string {
	clean, problem, _ := fieldrule.CheckPoolPath(p)
	switch problem {
	case fieldrule.PathOK:
	case fieldrule.PathMissing:
		f.block(field.Required(fp, "an absolute path is required"))
	case fieldrule.PathTooLong:
		f.block(field.TooLong(fp, p, MaxPathLength))
	case fieldrule.PathRoot:
		f.tighten(field.Invalid(fp, p, "must not be the root directory"))
	case fieldrule.PathRelative:
		f.block(field.Invalid(fp, p, "must be an absolute path"))
	case fieldrule.PathNUL:
		f.block(field.Invalid(fp, p, "must not contain a NUL byte"))
	case fieldrule.PathBackstep:
		f.block(field.Invalid(fp, p, "must not contain a '..' element"))
	}
	return clean
}

// validatePVCTemplate refuses templates the operator could not turn into
// a working pool: what the API server would refuse on every PVC, and a
// ReadWriteMany block device, which hpp-mounter would format with XFS and
// mount on every node at once (XFS is not a cluster filesystem: that
// corrupts it).
//
// Missing access modes or size are hpp's rules (the API server refuses such
// a PVC anyway, naming the field); the ReadWriteMany Block rule blocks even
// a stored CR: running it is what corrupts the filesystem.
func validatePVCTemplate(f *findings, fp *field.Path, t *corev1.PersistentVolumeClaimSpec) {
	if len(t.AccessModes) == 0 {
		f.tighten(field.Required(fp.Child("accessModes"),
			"ReadWriteOnce (a PVC per node) or ReadWriteMany (one PVC shared by the nodes)"))
	}
	if _, ok := t.Resources.Requests[corev1.ResourceStorage]; !ok {
		f.tighten(field.Required(fp.Child("resources", "requests", "storage"), "the size of each pool PVC"))
	}
	if t.VolumeMode != nil && *t.VolumeMode == corev1.PersistentVolumeBlock && slices.Contains(t.AccessModes, corev1.ReadWriteMany) {
		f.block(field.Invalid(fp.Child("volumeMode"), "Block",
			"a ReadWriteMany Block PVC would get one XFS filesystem mounted on every node at once, which corrupts it: use ReadWriteOnce (a PVC per node) or a Filesystem ReadWriteMany PVC (NFS, CephFS)"))
	}
}
