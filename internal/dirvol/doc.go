// Package dirvol manages quota-free directory volumes inside one root
// directory: a CSI pool's <path>/csi, or the legacy provisioner's PV_DIR.
//
// Volumes are the direct children of the root, named by their id. hpp keeps
// its own state next to them in hidden directories, which no valid id can
// name (ids never start with '.'):
//
//	.hpp-staging/     a volume is built here under a temporary name (mode and
//	                  owner applied) and then renamed into place, so a volume
//	                  directory is either absent or complete
//	.hpp-trash/       delete renames the volume (and its meta file) here
//	                  first, then removes them, in the background when asked;
//	                  a crash in between leaves only trash, which Recover empties
//	.hpp-meta/<id>.json  per-volume record (JSON), written before the
//	                  directory appears and moved to trash after it has gone
//
// A record up to 1 KiB is inline: a symbolic link whose target is the JSON
// text (read it with readlink, not cat). A link is created whole in one
// metadata operation, so it needs no data write and no fsync of its own:
// the create's fsync of the root commits it on a journaling filesystem. A
// larger record is a regular file, synced before the directory appears.
// Records written as files by earlier versions are read as before.
//
// Durability costs one journal commit per call on a journaling filesystem:
// a create syncs the root and then the meta directory (which finds nothing
// left to commit); a delete syncs the root once. Nothing on the Create or
// Delete path frees disk blocks: freeing is the purge's job, off the
// caller's path.
//
// Every id goes through pool.ValidateID / pool.ResolveIn before a path is built
// from it. All filesystem side effects go through the FileSystem interface so
// that tests can inject failures and crashes between any two steps.
package dirvol
