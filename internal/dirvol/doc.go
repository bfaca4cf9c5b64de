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
//	.hpp-meta/<id>.json  per-volume metadata, durable before the directory
//	                  appears and moved to trash after it has gone
//
// Durability costs one fsync per step that must survive a power loss: a
// create syncs the meta file, the meta directory and the root (on a
// journaling filesystem the first of these commits the lot, the others only
// flush); a delete syncs the root once. Nothing on the Create or Delete path
// frees disk blocks: freeing is the purge's job, off the caller's path.
//
// Every id goes through pool.ValidateID / pool.ResolveIn before a path is built
// from it. All filesystem side effects go through the FileSystem interface so
// that tests can inject failures and crashes between any two steps.
package dirvol
