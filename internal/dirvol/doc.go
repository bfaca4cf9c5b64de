// Package dirvol manages quota-free directory volumes inside one root
// directory: a CSI pool's volumes directory, or the legacy provisioner's
// PV_DIR.
//
// Volumes are the direct children of the root, named by their id; a volume
// directory holds nothing of hpp's, so a pod sees only its own data and
// cannot edit what hpp knows about it. hpp keeps its own state next to the
// volumes in hidden entries, which no valid id can name (ids never start with
// '.'), all mode 0700:
//
//	.hpp-records/<id>  the volume's record: one JSON file (requested size,
//	                   kind, owner, mode, attributes), written with plain os
//	                   calls
//	.hpp-staging/      a volume directory and its record are built here
//	                   under temporary names that start with this node's tag
//	.hpp-trash/        delete renames the volume (and its record) here
//	                   first; the data is removed afterwards
//	.hpp-lock          shared pools only: the cross-node per-id locks
//
// # Ordering and recovery
//
// A record and its directory live in two directories, so no single rename
// can publish both. The order makes up for it: a record is durable before
// its directory appears, and leaves only after its directory's removal is
// durable.
//
//	create: stage the directory (owner, mode); write the record in staging,
//	        rename it into .hpp-records, fsync it and .hpp-records; rename the
//	        directory into place (exclusive rename); fsync the root
//	delete: rename the directory into trash; fsync the root; rename the
//	        record into trash; remove both (now or in the background)
//
// Whatever a crash or a power loss keeps of these steps, on any filesystem,
// is one of: nothing; staging leftovers; a record without a directory; a
// complete volume with its record; trash. Recover (at start, before
// serving) removes staging leftovers and trash, and drops records whose
// directory is missing. So a published directory never lacks its record,
// and a directory without a record was not made by hpp: it is a volume of
// the KubeVirt driver being replaced (or made by hand), adopted as it is.
// An ephemeral volume is therefore always known as one and deleted on
// unpublish.
//
// # Durability and group commit
//
// Create and Delete return once their result survives a power loss. The
// fsyncs of the root and of .hpp-records are shared: callers that arrive
// while one is in flight wait for the next, and one fsync makes them all
// durable (groupSync). A lone caller pays one fsync per step: on a
// journaling filesystem a create costs two journal commits (the record's,
// then the directory's) and a delete one. Nothing on the Create or Delete
// path frees disk blocks: freeing is the purge's job, off the caller's path.
//
// # Records of earlier versions
//
// Earlier versions kept records in .hpp-meta/ as <id>.json files, as
// symbolic links holding the JSON (read with readlink), or under hashed
// names. Recover rewrites those of live volumes as record files (each
// durable before the old one is removed), drops the rest and removes
// .hpp-meta/. It is a one-time cost at the first start after an upgrade.
//
// # Shared pools
//
// On a pool every node mounts (Options.Shared), staging and trash names
// carry the node's tag, Recover and the purge touch only this node's
// entries, and Create, Delete and Recover's orphan check hold the id's
// cross-node lock (an fcntl byte-range lock on .hpp-lock), so two nodes
// working on the same id take turns.
//
// Every id goes through pool.ValidateID / pool.ResolveIn before a path is
// built from it. All filesystem side effects go through the FileSystem
// interface so that tests can inject failures and crashes between any two
// steps.
package dirvol
