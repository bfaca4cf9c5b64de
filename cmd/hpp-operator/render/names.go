package render

import (
	"fmt"
	"hash/fnv"
)

// MaxNameLength bounds the names of per-node pool objects: a Job's name is
// copied into its pods' job-name label, and a label value is at most 63
// characters.
const MaxNameLength = 63

// Bases of upstream's per-node pool object names.
const (
	poolBase    = "hpp-pool"
	cleanupBase = "cleanup-pool"
)

// nameWithMaxLength is upstream's getResourceNameWithMaxLength, byte for
// byte: object names are stored in clusters, and an object upstream made
// is only found again (adopted, not replaced by an empty twin) under the
// name it computed. <base>-<suffix> when it fits; else, when not even
// "-<8 hex>-" and the suffix fit, <base>-<fnv32a(base-suffix)> cut to max;
// else <base cut>-<fnv32a(base)>-<suffix>.
func nameWithMaxLength(base, suffix string, max int) string {
	if max <= 0 {
		return ""
	}
	name := base + "-" + suffix
	if len(name) <= max {
		return name
	}
	keep := max - len("-12345678-") - len(suffix)
	if keep < 0 {
		short := base[:min(len(base), max-len("-12345678"))] + "-" + fnv32(name)
		return short[:min(max, len(short))]
	}
	return base[:keep] + "-" + fnv32(base) + "-" + suffix
}

func fnv32(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s)) // never fails
	return fmt.Sprintf("%08x", h.Sum32())
}

// MounterName is the mounter Deployment of a pool on a node; upstream
// names it like the pool's claim on that node.
func MounterName(pool, node string) string {
	return nameWithMaxLength(poolBase, pool+"-"+node, MaxNameLength)
}

// CleanupJobName is the Job that unmounts a pool on a node.
func CleanupJobName(pool, node string) string {
	return nameWithMaxLength(cleanupBase, pool+"-"+node, MaxNameLength)
}

// PoolClaimName is the PVC of a pool on a node, or the one PVC every node
// shares (node "") for a ReadWriteMany template.
func PoolClaimName(pool, node string) string {
	if node == "" {
		return nameWithMaxLength(poolBase, pool+"-shared", MaxNameLength)
	}
	return nameWithMaxLength(poolBase, pool+"-"+node, MaxNameLength)
}

// PoolLabelValue is the value of PoolLabel for a pool, as upstream sets it.
func PoolLabelValue(pool string) string { return nameWithMaxLength(pool, "hpp", MaxNameLength) }

// poolVolume is the name of a pool's volume in the CSI DaemonSet's pods, as
// upstream's getMountNameFromStoragePool computes it (a volume name is a
// DNS label: at most 63 characters).
func poolVolume(pool string) string { return nameWithMaxLength(pool, "data-dir", MaxNameLength) }
