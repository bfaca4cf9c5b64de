// Package treecopy copies a directory tree the way a volume clone or
// snapshot needs it: every entry with its owner, mode, timestamps and
// extended attributes (SELinux labels and ACLs are xattrs), symbolic links
// as links, hard links as links, device nodes and fifos as nodes, and
// sparse files with their holes. File data is shared by reflink (FICLONE)
// when the caller asks for it and the filesystem can, and copied otherwise.
//
// The copy writes into a directory the caller made (a staging directory)
// and makes nothing durable: the caller syncs the filesystem and publishes
// the result with one rename, so a copy that stops halfway is never seen.
package treecopy

// Mode says how file data is copied.
type Mode int

const (
	// Copy reads and writes the data ranges of each file, skipping holes.
	Copy Mode = iota
	// Reflink shares each file's extents (FICLONE), falling back to Copy
	// for a file the filesystem cannot clone (another filesystem, a
	// filesystem without reflink).
	Reflink
)

func (m Mode) String() string {
	if m == Reflink {
		return "reflink"
	}
	return "copy"
}

// Stats counts what a copy did.
type Stats struct {
	Dirs, Files, Symlinks, HardLinks, Nodes int64
	// Bytes is the apparent size of the regular files copied (holes
	// included), the size a restored volume needs at least.
	Bytes int64
	// Reflinked counts the files whose data was shared, not copied.
	Reflinked int64
	// DataBytes is the file data read and written: the data ranges, not
	// the holes, and nothing for a reflinked file.
	DataBytes int64
}
