package probes

import "fmt"

// CapacitySlack is how far a published capacity may be from the pool's
// free bytes: csi-provisioner publishes every poll interval (10 s in the
// harness) while the writers go on appending (a record every 100 ms, well
// under 1 MiB between two polls).
const CapacitySlack = 1 << 20

// CheckCapacity fails when the capacity published for a pool (its
// CSIStorageCapacity; nil when there is none) is not the pool's free bytes
// (statfs: what hpp-csi offers on a pool with no headroom and no
// reservations) within CapacitySlack.
func CheckCapacity(what string, published *int64, free int64) error {
	if published == nil {
		return &Violation{fmt.Sprintf("%s: no CSIStorageCapacity published (the pool has %d bytes free)", what, free)}
	}
	if d := *published - free; d > CapacitySlack || d < -CapacitySlack {
		return &Violation{fmt.Sprintf("%s: CSIStorageCapacity says %d bytes, the pool has %d free (off by %d, more than %d)",
			what, *published, free, d, CapacitySlack)}
	}
	return nil
}
