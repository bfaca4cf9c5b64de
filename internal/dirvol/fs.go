package dirvol

import "io/fs"

// FileSystem is every side effect the Store has on disk. Each method is one
// step that a crash may interrupt, which is what lets tests stop (or fail) a
// create or delete between any two of them. Errors must name the path, as
// *fs.PathError and *os.LinkError do: the Store adds the step, not the path.
type FileSystem interface {
	MkdirAll(path string, perm fs.FileMode) error
	// MkdirTemp creates a new directory with a random name in dir (see
	// os.MkdirTemp) and returns its path.
	MkdirTemp(dir, pattern string) (string, error)
	Rename(oldpath, newpath string) error
	// RenameNoReplace renames like Rename but fails with an error matching
	// fs.ErrExist when newpath exists (even an empty directory, which rename(2)
	// would silently replace).
	RenameNoReplace(oldpath, newpath string) error
	Remove(path string) error
	RemoveAll(path string) error
	Lstat(path string) (fs.FileInfo, error)
	Chmod(path string, mode fs.FileMode) error
	// Lchown changes owner and group; -1 leaves one unchanged.
	Lchown(path string, uid, gid int) error
	ReadDir(path string) ([]fs.DirEntry, error)
	// ReadFile reads a record; it never follows a symbolic link.
	ReadFile(path string) ([]byte, error)
	// WriteFile creates path (it must not exist) and writes data, without
	// waiting for the disk: SyncFile does that.
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// SyncFile fsyncs a file's data and inode.
	SyncFile(path string) error
	// SyncDir fsyncs a directory, making renames and removals in it
	// durable, and its own attributes.
	SyncDir(path string) error
	// SetRecordAttr stores data as the record attribute (RecordAttr) of the
	// directory path, never following a symbolic link.
	SetRecordAttr(path string, data []byte) error
	// RecordAttr reads the record attribute of path; an error matching
	// fs.ErrNotExist when path has none.
	RecordAttr(path string) ([]byte, error)
	// CanKeepRecordAttrs says whether the volume directories of a root
	// whose private area dir is given can carry their records as
	// attributes (see the package doc, "Records"), and why not.
	CanKeepRecordAttrs(dir string) (ok bool, why string)
	// Readlink returns what the symbolic link path holds; it fails with
	// EINVAL when path is not a symbolic link. Only the migration of
	// records written by earlier versions (inline records) needs it.
	Readlink(path string) (string, error)
	// LockID takes the cross-node lock of id in the lock file lockFile
	// (see crossNodeLock) and returns its release.
	LockID(lockFile, id string) (unlock func() error, err error)
}
