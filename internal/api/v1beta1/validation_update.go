package v1beta1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateUpdate returns every problem with changing old into updated: those
// of the new spec, and every change that would orphan data (re-pathing,
// renaming or removing a pool that holds volumes; re-pathing the legacy
// directory while legacy PVs exist). Each message says how to do the change
// safely.
func ValidateUpdate(old, updated *HostPathProvisionerSpec, use Usage) field.ErrorList {
	errs := ValidateSpec(updated)
	pools := field.NewPath("spec", "storagePools")
	newByName := map[string]int{}
	for i, p := range updated.StoragePools {
		newByName[p.Name] = i
	}
	for _, op := range old.StoragePools {
		n := use.PoolVolumes[op.Name]
		if n == 0 {
			continue
		}
		i, kept := newByName[op.Name]
		switch {
		case kept && updated.StoragePools[i].Path != op.Path:
			errs = append(errs, field.Forbidden(pools.Index(i).Child("path"), fmt.Sprintf(
				"pool %q holds %d volume(s) in %s; moving it to %s would orphan them. "+
					"To move a pool safely: add a new pool at the new path, move the data "+
					"(e.g. recreate or clone the volumes onto the new pool), delete the old pool's "+
					"PersistentVolumes, then change or remove the old pool",
				op.Name, n, op.Path, updated.StoragePools[i].Path)))
		case !kept:
			errs = append(errs, field.Forbidden(pools, fmt.Sprintf(
				"pool %q (path %s) holds %d volume(s) and is missing from the new spec; "+
					"each PersistentVolume names its pool (volume attribute storagePool), so removing "+
					"or renaming the pool would orphan them. Keep the pool (a StorageClass may point "+
					"a new name at it instead), or delete its PersistentVolumes first",
				op.Name, op.Path, n)))
		}
	}
	if old.PathConfig != nil && updated.PathConfig != nil && use.LegacyVolumes > 0 &&
		old.PathConfig.Path != updated.PathConfig.Path {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "pathConfig", "path"), fmt.Sprintf(
			"%d legacy PersistentVolume(s) live in %s; changing the path would orphan them. "+
				"Delete those PersistentVolumes first, or keep the path",
			use.LegacyVolumes, old.PathConfig.Path)))
	}
	return errs
}
