package migrate

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Inventory is everything a plan is made from: one List of each kind, and
// the backups of earlier runs.
type Inventory struct {
	PVs            []corev1.PersistentVolume
	Claims         []corev1.PersistentVolumeClaim
	Pods           []corev1.Pod
	Nodes          []corev1.Node
	CSINodes       []storagev1.CSINode
	StorageClasses []storagev1.StorageClass
	// Backups by PV name.
	Backups map[string]*corev1.PersistentVolume
}

// Selection narrows a plan. Empty fields select everything.
type Selection struct {
	Names     []string
	Namespace string
	Node      string
}

// Config of a plan.
type Config struct {
	// PVDir is the legacy provisioner's PV_DIR; empty: inferred when every
	// legacy PV is in the same directory.
	PVDir string
	// Pool is the hpp-csi pool whose legacyPath is PV_DIR.
	Pool       string
	AllowInUse bool
	Select     Selection
}

// IsLegacy tells a PV made by the legacy provisioner (KubeVirt's or
// hpp-legacy): a hostPath source with its provisioned-by or identity
// annotation. Other hostPath PVs (made by hand) are never touched.
func IsLegacy(pv *corev1.PersistentVolume) bool {
	if pv.Spec.HostPath == nil {
		return false
	}
	return pv.Annotations[contract.AnnProvisionedBy] == contract.LegacyProvisionerName || pv.Annotations[contract.AnnIdentity] == contract.LegacyProvisionerName
}

// IsMigrated tells a CSI PV this tool made.
func IsMigrated(pv *corev1.PersistentVolume) bool {
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName && pv.Annotations[contract.AnnMigratedFrom] == contract.LegacyProvisionerName
}

// InferPVDir returns the one directory holding every legacy PV's
// directory, "" when there is no legacy PV.
func InferPVDir(pvs []corev1.PersistentVolume) (string, error) {
	dirs := map[string]bool{}
	for i := range pvs {
		if IsLegacy(&pvs[i]) {
			dirs[filepath.Dir(filepath.Clean(pvs[i].Spec.HostPath.Path))] = true
		}
	}
	var list []string
	for d := range dirs {
		list = append(list, d)
	}
	sort.Strings(list)
	if len(list) > 1 {
		return "", fmt.Errorf("--pv-dir: legacy PVs are in %d directories (%s): pass the legacy provisioner's PV_DIR", len(list), strings.Join(list, ", "))
	}
	if len(list) == 0 {
		return "", nil
	}
	return list[0], nil
}

// Assess makes the plan: every selected legacy PV with its state, and the
// legacy StorageClasses with their CSI counterparts. It is pure: the same
// inventory gives the same plan.
func Assess(inv Inventory, cfg Config) (*Plan, error) {
	if cfg.Pool == "" {
		return nil, errors.New("--storage-pool: empty")
	}
	pvDir := cfg.PVDir
	if pvDir == "" {
		var err error
		// The backups count too: the PV of an interrupted run may be gone.
		all := slices.Clone(inv.PVs)
		for _, b := range inv.Backups {
			all = append(all, *b)
		}
		if pvDir, err = InferPVDir(all); err != nil {
			return nil, err
		}
	} else if !filepath.IsAbs(pvDir) {
		return nil, fmt.Errorf("--pv-dir %q: must be an absolute path", pvDir)
	}
	ix := newIndex(inv)
	if pvDir != "" {
		pvDir = filepath.Clean(pvDir)
	}
	plan := &Plan{PVDir: pvDir, Pool: cfg.Pool}
	seen := map[string]bool{}
	for i := range inv.PVs {
		pv := &inv.PVs[i]
		seen[pv.Name] = true
		backup := inv.Backups[pv.Name]
		var it *Item
		switch {
		case backup != nil && pv.UID != backup.UID && IsLegacy(backup) && IsMigrated(pv) && !ix.finished(pv, backup):
			it = ix.assess(backup, pv, plan, cfg)
		case backup != nil && pv.UID != backup.UID && IsLegacy(backup) && (pv.DeletionTimestamp != nil || slices.Contains(pv.Finalizers, contract.FinalizerMigration)):
			it = ix.assess(backup, pv, plan, cfg)
		case IsLegacy(pv):
			if backup != nil && backup.UID == pv.UID {
				it = ix.assess(backup, pv, plan, cfg) // the backup has the original policy
			} else {
				it = ix.assess(pv, pv, plan, cfg)
			}
		case IsMigrated(pv):
			it = migratedItem(pv)
		default:
			continue
		}
		if cfg.Select.match(it) {
			plan.Items = append(plan.Items, *it)
		}
	}
	// A backup whose PV is gone: a run killed between release and create.
	for name, backup := range inv.Backups {
		if seen[name] || !IsLegacy(backup) {
			continue
		}
		it := ix.assess(backup, nil, plan, cfg)
		if cfg.Select.match(it) {
			plan.Items = append(plan.Items, *it)
		}
	}
	sort.Slice(plan.Items, func(i, j int) bool { return plan.Items[i].PV < plan.Items[j].PV })
	plan.StorageClasses = counterparts(inv.StorageClasses, cfg.Pool)
	return plan, nil
}

func (s Selection) match(it *Item) bool {
	if len(s.Names) > 0 && !slices.Contains(s.Names, it.PV) {
		return false
	}
	if s.Namespace != "" && !strings.HasPrefix(it.Claim, s.Namespace+"/") {
		return false
	}
	if s.Node != "" && it.Node != s.Node {
		return false
	}
	return true
}

func migratedItem(pv *corev1.PersistentVolume) *Item {
	it := &Item{PV: pv.Name, State: StateMigrated, VolumeHandle: pv.Spec.CSI.VolumeHandle,
		Directory: pv.Annotations[contract.AnnMigratedFromPath], StorageClass: pv.Spec.StorageClassName}
	if ref := pv.Spec.ClaimRef; ref != nil {
		it.Claim, it.ClaimUID = ref.Namespace+"/"+ref.Name, string(ref.UID)
	}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		it.Size = q.String()
	}
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, t := range na.Required.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				if e.Key == contract.TopologyKey && len(e.Values) == 1 {
					it.Node = e.Values[0]
				}
			}
		}
	}
	return it
}

// finished tells a migrated PV whose last steps are done: policy restored,
// PV Bound, and its claim Bound to it (not Lost).
func (ix *index) finished(pv, backup *corev1.PersistentVolume) bool {
	want := backup.Spec.PersistentVolumeReclaimPolicy
	if want == "" {
		want = corev1.PersistentVolumeReclaimDelete
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != want || pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil {
		return false
	}
	c := ix.claims[pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name]
	return c != nil && c.UID == pv.Spec.ClaimRef.UID && c.Spec.VolumeName == pv.Name && c.Status.Phase == corev1.ClaimBound
}
