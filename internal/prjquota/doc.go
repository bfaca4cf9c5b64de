// Package prjquota enforces volume sizes with project quotas, as a layer of
// its own around the quota-free directory lifecycle of internal/dirvol.
//
// Each volume directory of an enforcing pool gets a project ID of its own,
// with the inherit flag so that everything created inside it is charged to
// it, and a hard block limit equal to its capacity. The kernel then refuses
// the write that would pass the limit (EDQUOT, "Disk quota exceeded"),
// reports the limit as the size of the directory in statfs (df inside the
// pod), and keeps the usage that NodeGetVolumeStats reports without a walk.
//
// Project IDs are state like any other. A Ledger hands them out from the
// pool's range and records each as a symbolic link
// <pool>/.hpp-quota/<project id> whose target is the volume id: creating it
// is atomic and exclusive (a second holder gets EEXIST), so an ID is never
// given twice, and the link is the record of the volume's ID. The order of
// steps makes every crash finishable by Recover:
//
//	create:  link <id> -> volume, set the limit, set the ID on the staged
//	         directory (before a clone's data is copied in), publish it
//	expand:  record the new size (dirvol), raise the limit
//	delete:  move the directory to the trash (dirvol), clear the limit,
//	         remove the link
//	adopt:   (a directory that has no ID, expanded) link, limit, the ID on
//	         every entry inside, the ID on the directory itself last
//
// Recover then makes each link's volume carry its ID and a limit equal to
// its recorded size, and releases the links whose volume is gone. An ID
// whose blocks are still charged (a deleted volume's trash being purged, or
// another user of project quotas on the filesystem) is never handed out:
// allocation skips every ID with usage or limits it does not hold.
//
// The links need no fsync of their own: they live on the pool's
// filesystem, whose journal commits them with the next fsync dirvol makes
// there (the staged directory's record, the root after the rename), in
// order, before the volume they belong to can be durable.
package prjquota
