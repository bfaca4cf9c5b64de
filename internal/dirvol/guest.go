package dirvol

import (
	"context"
	"fmt"
)

// A guest Store works in a root that another process owns: hpp-csi serving
// volumes that hpp-migrate moved from hpp-legacy, in hpp-legacy's PV_DIR,
// while hpp-legacy may still run there for the PVs not migrated yet. Both
// use this package on the same directory, and a plain Store there is not
// safe (TestGuestLeavesOwnersCreateInFlight shows each failure):
//
//   - hpp-legacy opens PV_DIR with Options{} (cmd/hpp-legacy/run.go): not
//     shared, so ours() is true for every staging and trash entry, and
//     either process's Recover would remove the other's staging entries,
//     failing a create in flight;
//   - with record files, Recover drops a record whose directory is
//     missing, which is exactly the state of a create between publishing
//     its record and renaming its directory into place (create.go): the
//     other process's Recover would leave a published volume without its
//     record. The Shared mode does not help here: it drops such records
//     under its cross-node lock, which hpp-legacy does not take. (Attribute
//     records have no such window: the record moves with its directory.)
//
// So a guest never creates (hpp-csi only publishes, measures and deletes
// legacy volumes), and its Recover and purge touch only entries named with
// its own tag (pass a NodeID that differs from the owner's, whose tag is
// "local" with no NodeID) and no record: the owner's Recover drops orphan
// records, and a guest Delete that stopped half-way drops its own stale
// record when the CO retries it. Records of earlier versions are left to
// the owner too. The reverse direction is harmless: the owner's Recover
// may remove a guest's trash entry, which holds a volume being deleted
// anyway, and every guest step tolerates a trash entry or record that
// vanished (the Delete fails at most once and its retry finishes).
func (s *Store) refuseGuestCreate(id string) error {
	if s.guest {
		return fmt.Errorf("create volume %q: %s belongs to another process (opened as a guest); hpp never creates volumes there", id, s.root)
	}
	return nil
}

// migrateOwnedOldRecords rewrites records of the old format, unless the root
// is someone else's.
func (s *Store) migrateOwnedOldRecords(ctx context.Context) (int, error) {
	if s.guest {
		return 0, nil
	}
	return s.migrateOldRecords(ctx)
}
