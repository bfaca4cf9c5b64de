package prjquota

import "fmt"

// Check says why the filesystem of dir (a pool with enforceSize) cannot
// enforce sizes, naming the mount option or feature to add; nil when it
// can. The kernel is asked (Probe), never guessed from a version.
func Check(b Backend, dir string) error {
	p, err := b.Probe(dir)
	if err != nil {
		return fmt.Errorf("enforceSize: cannot tell whether %s enforces project quotas: %w", dir, err)
	}
	return p.problem(dir)
}

func (p Probe) problem(dir string) error {
	switch p.FSType {
	case "xfs":
		switch {
		case p.NoQuotactl != nil:
			return fmt.Errorf("enforceSize: %s is XFS, but this kernel has no XFS quota support (quotactl: %w); use a kernel built with CONFIG_XFS_QUOTA", dir, p.NoQuotactl)
		case !p.Accounting || !p.Enforcing:
			return fmt.Errorf("enforceSize: %s is XFS without project quotas enforced; mount it with the prjquota option (in /etc/fstab or the mount unit: XFS turns quotas on only at mount, not on remount)", dir)
		}
	case "ext4":
		switch {
		case p.NoQuotactl != nil:
			return fmt.Errorf("enforceSize: %s is ext4, but this kernel has no quota support for it (quotactl: %w); use a kernel built with CONFIG_QUOTA and CONFIG_QFMT_V2", dir, p.NoQuotactl)
		case !p.Accounting:
			return fmt.Errorf("enforceSize: %s is ext4 without project quota accounting; add the features with tune2fs -O project,quota <device> while it is unmounted (mkfs.ext4 -O project,quota for a new one), then mount it with the prjquota option (a kernel without CONFIG_QFMT_V2 refuses that mount)", dir)
		case !p.Enforcing:
			return fmt.Errorf("enforceSize: %s is ext4 with project quotas counted but not enforced; mount it with the prjquota option", dir)
		}
	default:
		return fmt.Errorf("enforceSize: %s is on a %s filesystem; size enforcement needs XFS mounted with prjquota, or ext4 with the features project,quota mounted with prjquota", dir, p.FSType)
	}
	return nil
}
