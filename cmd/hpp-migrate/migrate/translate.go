package migrate

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Target is where a legacy volume goes: the node its directory is on, the
// hpp-csi pool whose legacyPath is PV_DIR, and the directory's name in it.
type Target struct {
	Node string
	Pool string
	// Dir is the directory's name in PV_DIR and the CSI volume handle.
	Dir string
}

// Validate names the field at fault.
func (t Target) Validate() error {
	var errs []error
	if t.Node == "" {
		errs = append(errs, errors.New("target.node: empty"))
	}
	if t.Pool == "" {
		errs = append(errs, errors.New("target.pool: empty"))
	}
	if err := validDirName(t.Dir); err != nil {
		errs = append(errs, fmt.Errorf("target.dir: %w", err))
	}
	return errors.Join(errs...)
}

func validDirName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a directory name", name)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("%q has a path separator", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("%q is hidden (hpp keeps its own state in hidden entries)", name)
	}
	return nil
}

// LegacyDir returns the directory name of a legacy PV inside pvDir and
// whether it uses USE_NAMING_PREFIX (<claim>-<pv>). Anything else — a path
// outside pvDir, a nested path, a name that is neither form — is refused:
// hpp-csi resolves a migrated volume as <legacyPath>/<handle> and nowhere
// else.
func LegacyDir(pv *corev1.PersistentVolume, pvDir string) (dir string, prefixed bool, err error) {
	if pv.Spec.HostPath == nil {
		return "", false, errors.New("spec.hostPath: not a hostPath volume")
	}
	path := pv.Spec.HostPath.Path
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return "", false, fmt.Errorf("spec.hostPath.path %q: not a clean absolute path", path)
	}
	if filepath.Dir(path) != filepath.Clean(pvDir) {
		return "", false, fmt.Errorf("spec.hostPath.path %q: outside PV_DIR %s (not a direct child)", path, pvDir)
	}
	dir = filepath.Base(path)
	if err := validDirName(dir); err != nil {
		return "", false, fmt.Errorf("spec.hostPath.path %q: %w", path, err)
	}
	if dir == pv.Name {
		return dir, false, nil
	}
	if ref := pv.Spec.ClaimRef; ref != nil && dir == ref.Name+"-"+pv.Name {
		return dir, true, nil
	}
	return "", false, fmt.Errorf("spec.hostPath.path %q: directory %q is neither <pv name> nor <claim name>-<pv name>", path, dir)
}

// Translate returns the CSI PV that replaces the legacy PV orig (the object
// as it was before migration, from the backup). Everything that describes
// the volume and its binding is carried over; only the source, the node
// affinity and the provisioner annotations change. The result has orig's
// reclaim policy; the caller creates it with Retain first.
func Translate(orig *corev1.PersistentVolume, t Target) (*corev1.PersistentVolume, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if orig.Spec.HostPath == nil {
		return nil, fmt.Errorf("PV %s: spec.hostPath: not a hostPath volume", orig.Name)
	}
	if orig.Spec.ClaimRef == nil || orig.Spec.ClaimRef.UID == "" {
		// Without the claim's UID the new PV could be bound to whichever
		// claim of that name exists when it appears.
		return nil, fmt.Errorf("PV %s: spec.claimRef: must name the bound claim with its uid", orig.Name)
	}
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        orig.Name,
			Labels:      copyMap(orig.Labels),
			Annotations: translateAnnotations(orig),
			Finalizers:  append([]string(nil), orig.Finalizers...),
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      orig.Spec.Capacity.DeepCopy(),
			AccessModes:                   append([]corev1.PersistentVolumeAccessMode(nil), orig.Spec.AccessModes...),
			ClaimRef:                      claimRef(orig.Spec.ClaimRef),
			PersistentVolumeReclaimPolicy: orig.Spec.PersistentVolumeReclaimPolicy,
			StorageClassName:              orig.Spec.StorageClassName,
			MountOptions:                  append([]string(nil), orig.Spec.MountOptions...),
			VolumeMode:                    orig.Spec.VolumeMode,
			VolumeAttributesClassName:     orig.Spec.VolumeAttributesClassName,
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: contract.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{t.Node},
				}}}},
			}},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:       contract.DriverName,
				VolumeHandle: t.Dir,
				VolumeAttributes: map[string]string{
					contract.ParamStoragePool:    t.Pool,
					contract.VolumeContextLayout: contract.LayoutLegacy,
				},
			}},
		},
	}
	return pv, nil
}

// translateAnnotations keeps the user's and Kubernetes' annotations and
// swaps the legacy provisioner's for the CSI driver's: provisioned-by
// names the driver so that csi-provisioner (not hpp-legacy) deletes the
// volume when a Delete-policy claim goes; the identity and owner-node
// annotations would make hpp-legacy act on a volume that is no longer its.
func translateAnnotations(orig *corev1.PersistentVolume) map[string]string {
	ann := copyMap(orig.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	delete(ann, contract.AnnIdentity)
	delete(ann, contract.AnnProvisionOnNode)
	// The last-applied annotation of kubectl would describe the old source.
	delete(ann, corev1.LastAppliedConfigAnnotation)
	ann[contract.AnnProvisionedBy] = contract.DriverName
	ann[contract.AnnMigratedFrom] = contract.LegacyProvisionerName
	ann[contract.AnnMigratedFromPath] = orig.Spec.HostPath.Path
	if orig.UID != "" {
		ann[contract.AnnMigratedFromUID] = string(orig.UID)
	}
	return ann
}

// Restore returns the object that re-creates orig (a backed-up PV): the
// same metadata and spec, without what the API server owns (uid,
// resourceVersion, timestamps, status).
func Restore(orig *corev1.PersistentVolume) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        orig.Name,
			Labels:      copyMap(orig.Labels),
			Annotations: copyMap(orig.Annotations),
			Finalizers:  append([]string(nil), orig.Finalizers...),
		},
		Spec: *orig.Spec.DeepCopy(),
	}
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	if orig.UID != "" {
		pv.Annotations[contract.AnnRestoredFrom] = string(orig.UID)
	}
	pv.Spec.ClaimRef = claimRef(orig.Spec.ClaimRef)
	return pv
}

// claimRef keeps what identifies the claim. The resourceVersion of the
// claim when it was bound means nothing to a new PV.
func claimRef(ref *corev1.ObjectReference) *corev1.ObjectReference {
	if ref == nil {
		return nil
	}
	return &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID,
	}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
