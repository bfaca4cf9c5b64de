// Package dirvol manages quota-free directory volumes inside one root
// directory: a CSI pool's volumes directory, or the legacy provisioner's
// PV_DIR.
//
// Volumes are the direct children of the root, named by their id; a volume
// directory holds nothing of hpp's, so a pod sees only its own data. hpp
// keeps its own state next to the volumes in hidden entries, which no valid
// id can name (ids never start with '.'), all mode 0700:
//
//	.hpp-staging/      a volume directory (and a record file) is built here
//	                   under a temporary name that starts with this node's tag
//	.hpp-trash/        delete renames the volume (and a record file) here
//	                   first; the data is removed afterwards
//	.hpp-records/<id>  record files, on filesystems that cannot keep records
//	                   as attributes (below)
//	.hpp-lock          shared pools only: the cross-node per-id locks
//
// # Records
//
// A volume's record is one JSON document (requested size, kind, owner, mode,
// attributes). Where the filesystem allows it, it is the extended attribute
// trusted.hpp.record of the volume directory itself (RecordAttr): set while
// the directory is staged, it is published by the same rename as the
// directory and leaves with it, so no step of a create or delete can part
// a directory from its record, and a pod cannot read or edit it (trusted
// attributes need CAP_SYS_ADMIN). That needs a filesystem with trusted
// attributes whose journal commits metadata in order (ext4, XFS; and tmpfs,
// which keeps nothing across a reboot anyway): there the root's fsync after
// the rename also makes the attribute durable, so a create costs one
// journal commit, shared between concurrent callers. (ext4 without a
// journal reports the same filesystem type as ext4: do not put a pool on
// one.) Open probes this once per root and logs its choice.
//
// Elsewhere (NFS and other shared filesystems, btrfs, an unprivileged
// process) the record is the file .hpp-records/<id>. A record and its
// directory then live in two directories, and the order makes up for it: a
// record is durable before its directory appears, and leaves only after its
// directory's removal is durable.
//
//	create: stage the directory (owner, mode); attach the record: set the
//	        attribute, or write the file in staging, rename it into
//	        .hpp-records, fsync it and .hpp-records; rename the directory into
//	        place (exclusive rename); fsync the root
//	delete: rename the directory into trash; fsync the root; rename a
//	        record file into trash; remove both (now or in the background)
//
// Whatever a crash or a power loss keeps of these steps is one of: nothing;
// staging leftovers; a record file without a directory; a complete volume
// with its record; trash. Recover (at start, before serving) removes
// staging leftovers and trash, and drops record files whose directory is
// missing. So a published directory never lacks its record, and a
// directory without a record was not made by hpp: it is a volume of the
// KubeVirt driver being replaced (or made by hand), adopted as it is. An
// ephemeral volume is therefore always known as one and deleted on
// unpublish.
//
// # Durability and group commit
//
// Create and Delete return once their result survives a power loss. The
// fsyncs of the root (and of .hpp-records) are shared: callers that arrive
// while one is in flight wait for the next, and one fsync makes them all
// durable (groupSync). A lone caller pays one journal commit per create and
// one per delete with attribute records; with record files a create costs
// two (the record's, then the directory's). Nothing on the Create or Delete
// path frees disk blocks: freeing is the purge's job, off the caller's path.
//
// # Records of earlier versions
//
// Earlier versions kept records in .hpp-meta/ as <id>.json files, as
// symbolic links holding the JSON (read with readlink), or under hashed
// names, and then always as record files. Recover rewrites those of live
// volumes in the root's current form (each durable before the old one is
// removed), drops the rest and removes .hpp-meta/. It is a one-time cost at
// the first start after an upgrade.
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
