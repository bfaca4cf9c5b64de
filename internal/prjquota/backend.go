package prjquota

// Backend is the kernel's project quota interface. The Linux one
// (NewLinux) uses quotactl_fd and FS_IOC_FS[GS]ETXATTR; tests use a fake.
// dir is any directory on the filesystem in question (the pool's root).
type Backend interface {
	// Probe says what dir's filesystem is and what its project quotas do.
	Probe(dir string) (Probe, error)
	// Project reads path's project ID and, for a directory, whether new
	// entries inherit it.
	Project(path string) (id uint32, inherit bool, err error)
	// SetProject gives path project id; a directory also gets the inherit
	// flag. Symbolic links and special files are not touched.
	SetProject(path string, id uint32) error
	// Quota reads project id's limit and usage; an ID the filesystem has
	// no record of reads as zero.
	Quota(dir string, id uint32) (Quota, error)
	// SetLimit sets project id's hard block limit; 0 removes it.
	SetLimit(dir string, id uint32, bytes int64) error
}

// Probe is what a filesystem offers.
type Probe struct {
	// FSType is "xfs", "ext4" or the statfs magic number of another.
	FSType string
	// Accounting and Enforcing say whether project quotas are counted and
	// enforced (quotactl Q_XGETQSTATV; false when quotactl is missing).
	Accounting, Enforcing bool
	// NoQuotactl is the error quotactl gave when the kernel has no quota
	// support for this filesystem (ENOSYS, EOPNOTSUPP): not built in. A
	// filesystem mounted without quotas gives the same error on a kernel
	// that has them; then NoQuotactl is nil and Accounting false.
	NoQuotactl error
}

// Quota is one project's limit and usage.
type Quota struct {
	HardBytes  int64
	UsedBytes  int64
	UsedInodes int64
}

// inUse reports whether some owner charges or limits the ID.
func (q Quota) inUse() bool { return q.HardBytes != 0 || q.UsedBytes != 0 || q.UsedInodes != 0 }
