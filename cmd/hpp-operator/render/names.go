package render

import (
	"fmt"
	"hash/fnv"
)

// MaxNameLength bounds the names of per-node pool objects: a Job's name is
// copied into its pods' job-name label, and a label value is at most 63
// characters.
const MaxNameLength = 63

// nameWithMaxLength is <base>-<suffix>, shortened as upstream's operator
// shortens it when longer than max, so that objects it made keep their
// names (takeover) and two long names stay distinct: the base is cut and
// followed by an 8-hex FNV-1a hash of the whole base, then the suffix; a
// suffix too long for that is dropped and the hash covers both.
func nameWithMaxLength(base, suffix string, max int) string {
	name := base + "-" + suffix
	if len(name) <= max {
		return name
	}
	keep := max - len("-12345678-") - len(suffix)
	if keep < 0 {
		short := base[:min(len(base), max-9)] + "-" + fnv32(name)
		return short[:min(max, len(short))]
	}
	return base[:keep] + "-" + fnv32(base) + "-" + suffix
}

func fnv32(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s)) // never fails
	return fmt.Sprintf("%08x", h.Sum32())
}

// MounterName is the mounter Deployment of a pool on a node.
func MounterName(pool, node string) string {
	return nameWithMaxLength("hpp-pool-"+pool, node, MaxNameLength)
}

// CleanupJobName is the Job that unmounts a pool on a node.
func CleanupJobName(pool, node string) string {
	return nameWithMaxLength("cleanup-pool-"+pool, node, MaxNameLength)
}

// PoolClaimName is the PVC of a pool on a node, or the one PVC every node
// shares (node "") for a ReadWriteMany template.
func PoolClaimName(pool, node string) string {
	if node == "" {
		return nameWithMaxLength("hpp-pool-"+pool, "shared", MaxNameLength)
	}
	return nameWithMaxLength("hpp-pool-"+pool, node, MaxNameLength)
}

// PoolLabelValue is the value of PoolLabel for a pool, as upstream sets it.
func PoolLabelValue(pool string) string { return nameWithMaxLength(pool, "hpp", MaxNameLength) }
