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
//
// The same copy also has a stream form, for a clone whose source is on
// another node: Encode writes the tree into an io.Writer as one
// self-checking stream (format_linux.go says what it holds) and Decode
// recreates it from an io.Reader in a staging directory, with the same
// guarantees. Only data ranges travel: holes are sent as nothing and made
// again. The package only moves bytes; the transport (mTLS gRPC between
// the nodes' hpp-csi) is the caller's.
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
	// the holes, and nothing for a reflinked file. For Encode and Decode it
	// is the file data the stream carried, what "bytes sent" means to a
	// person watching a clone between nodes.
	DataBytes int64
	// StreamBytes is the whole stream's length, data and headers and
	// trailer (Encode and Decode; zero for Tree).
	StreamBytes int64
}
