// Package capacity reports how much of a pool's filesystem can be offered to
// volumes: statfs figures, a reserved headroom that is never offered, and
// whether a pool shares the node's root filesystem (where filling it up takes
// the node down with it).
package capacity

import (
	"errors"
	"math"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// Stats are one statfs of a filesystem, in bytes and inodes.
type Stats struct {
	TotalBytes     int64
	AvailableBytes int64 // what an unprivileged writer can still use
	UsedBytes      int64
	TotalInodes    int64
	FreeInodes     int64
	UsedInodes     int64
}

// Headroom is space kept free on a pool; the larger of the two applies.
type Headroom struct {
	Bytes   int64
	Percent float64
}

// Validate reports a negative byte count or a percentage outside [0,100),
// as *fieldrule.FieldError naming field.
func (h Headroom) Validate(field string) error {
	var errs []error
	if h.Bytes < 0 {
		errs = append(errs, &fieldrule.FieldError{Field: field, Reason: "reserved bytes " + formatInt(h.Bytes) + " must be zero or more"})
	}
	if !(h.Percent >= 0 && h.Percent < 100) {
		errs = append(errs, &fieldrule.FieldError{Field: field, Reason: "reserved percent " + formatFloat(h.Percent) + " must be at least 0 and less than 100"})
	}
	return errors.Join(errs...)
}

// Reserved is the headroom in bytes for a filesystem of totalBytes: the
// larger of Bytes and Percent of the total, rounded up so the reserve is never
// smaller than asked. Invalid parts count as zero.
func (h Headroom) Reserved(totalBytes int64) int64 {
	reserved := max(h.Bytes, 0)
	if h.Percent > 0 && h.Percent < 100 && totalBytes > 0 {
		pct := math.Ceil(float64(totalBytes) * h.Percent / 100)
		if pct >= float64(math.MaxInt64) {
			return math.MaxInt64
		}
		reserved = max(reserved, int64(pct))
	}
	return reserved
}

// Offered is what may be offered to new volumes: the available bytes minus
// the headroom, never negative.
func Offered(st Stats, h Headroom) int64 {
	return max(0, st.AvailableBytes-h.Reserved(st.TotalBytes))
}

// SameFilesystem reports whether a and b are on the same filesystem, by
// device id (symbolic links followed). To ask whether a pool shares the
// node's OS disk, compare it with a directory of the host's root seen
// through a hostPath mount, never with this process's "/": in a container
// that is the container's root. Bind mounts of one filesystem count as
// the same; btrfs subvolumes have their own device id and count as different.
func SameFilesystem(a, b string) (bool, error) {
	if err := errors.Join(validatePath("a", a), validatePath("b", b)); err != nil {
		return false, err
	}
	return sameFilesystem(a, b)
}

func validatePath(field, path string) error { return fieldrule.CheckAbsPath(field, path, false) }
