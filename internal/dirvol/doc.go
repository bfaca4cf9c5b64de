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
//	.hpp-trash/       delete renames the volume here first, then removes it;
//	                  a crash in between leaves only trash, which Recover empties
//	.hpp-meta/<id>.json  per-volume metadata, written atomically before the
//	                  directory appears and removed after it has gone
//
// Every id goes through pool.ValidateID / pool.ResolveIn before a path is built
// from it. All filesystem side effects go through the FileSystem interface so
// that tests can inject failures and crashes between any two steps.
package dirvol
