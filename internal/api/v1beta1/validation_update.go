package v1beta1

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// ValidateUpdate returns every problem with changing old into updated: those
// of the new spec that old did not already have (ratcheting: a CR upstream's
// operator accepted stays editable, and hpp's stricter rules apply to what
// the update changes), and every change that would orphan data (re-pathing,
// renaming or removing a pool that holds volumes; re-pathing the legacy
// directory while legacy PVs exist). Each message says how to do the change
// safely.
func ValidateUpdate(old, updated *HostPathProvisionerSpec, use Usage) field.ErrorList {
	errs := Ratchet(ValidateSpec(old), ValidateSpec(updated), old, updated)
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
					"each PersistentVolume names its pool (volume attribute "+contract.ParamStoragePool+"), so removing "+
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

// Ratchet drops from errs (updated's problems) every problem oldErrs (old's)
// already had: the same kind of error on the same field, the same value.
// Pools are matched by name, not index, so adding, removing or reordering
// pools does not make an unchanged pool's old problem new; feature gates by
// value. An error whose field or value the update changed stays.
func Ratchet(oldErrs, errs field.ErrorList, old, updated *HostPathProvisionerSpec) field.ErrorList {
	had := map[string]bool{}
	for _, e := range oldErrs {
		had[errorKey(e, old)] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[errorKey(e, updated)] {
			out = append(out, e)
		}
	}
	return out
}

var (
	poolIndex    = regexp.MustCompile(`^spec\.storagePools\[(\d+)\]`)
	gateIndex    = regexp.MustCompile(`^spec\.featureGates\[\d+\]`)
	anyPoolIndex = regexp.MustCompile(`storagePools\[\d+\]`)
)

// errorKey names an error independently of list positions: a pool's fields
// by the pool's name (and, for a pool whose content changed, its whole
// content, so any change of the pool re-checks it), a gate by its value.
func errorKey(e *field.Error, spec *HostPathProvisionerSpec) string {
	f := e.Field
	if m := poolIndex.FindStringSubmatch(f); m != nil {
		i, _ := strconv.Atoi(m[1])
		if i < len(spec.StoragePools) {
			p := spec.StoragePools[i]
			f = fmt.Sprintf("spec.storagePools[%s]%s", poolIdentity(&p), f[len(m[0]):])
		}
	}
	f = gateIndex.ReplaceAllString(f, "spec.featureGates[*]")
	// Value and detail may name another pool by index ("also
	// storagePools[2]", "is inside storagePools[2].path /data"): by path
	// or name they stay, so a new nesting or duplicate is new.
	rest := anyPoolIndex.ReplaceAllString(fmt.Sprintf("%v\x00%s", e.BadValue, e.Detail), "storagePools[*]")
	return fmt.Sprintf("%s\x00%s\x00%s", e.Type, f, rest)
}

// poolIdentity is a pool's name and content: an error on a pool the update
// changed in any way is checked again.
func poolIdentity(p *StoragePool) string {
	b, _ := json.Marshal(p)
	return string(b)
}
