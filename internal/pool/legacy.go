package pool

import (
	"fmt"
	"strings"
)

// A pool's legacyPath is the legacy provisioner's PV_DIR: hpp-migrate turns
// the hostPath PVs whose directories are <legacyPath>/<dir> into CSI volumes
// of the pool without moving them (cmd/hpp-migrate/README.md, "Contract with
// hpp-csi"). Its entries are looked up by id like a pool's own volumes, so
// the same rules keep every lookup inside it; on top of them, no directory
// that holds configured storage (a pool's path, snapshotPath or another
// legacyPath, such as the usual <legacyPath>/csi) is ever taken for a
// legacy volume, or deleting that "volume" would delete a whole pool.

// checkLegacyPaths validates every legacyPath against its own pool and the
// others, one problem per field.
func checkLegacyPaths(pools []Pool, skip map[int]bool) []error {
	var errs []error
	for j, p := range pools {
		if skip[j] || p.LegacyPath == "" {
			continue
		}
		field := fmt.Sprintf("%s[%d].legacyPath", docField, j)
		if err := cleanPath(field, &pools[j].LegacyPath); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := legacyConflict(pools, skip, j, field); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func legacyConflict(pools []Pool, skip map[int]bool, j int, field string) error {
	lp := pools[j].LegacyPath
	if own := pools[j].Path; validPath(own) {
		switch {
		case lp == own:
			return fieldErr(field, "%q is the pool's path; it must be the legacy provisioner's PV_DIR, where the legacy volumes are (for a pool at <dir>/csi usually <dir>)", lp)
		case within(own, lp):
			return fieldErr(field, "%q is inside the pool's path %q, where every directory is a CSI volume", lp, own)
		}
	}
	for i, o := range pools {
		if skip[i] || i == j {
			continue
		}
		at := func(f string) string { return fmt.Sprintf("%s[%d].%s", docField, i, f) }
		switch {
		case validPath(o.Path) && (lp == o.Path || within(o.Path, lp)):
			return fieldErr(field, "%q is inside %s %q, where every directory is a CSI volume", lp, at("path"), o.Path)
		case o.LegacyPath == lp:
			return fieldErr(field, "%q is already used by %s; two pools may not share one", lp, at("legacyPath"))
		case validPath(o.LegacyPath) && (within(o.LegacyPath, lp) || within(lp, o.LegacyPath)):
			return fieldErr(field, "%q and %s %q are nested; legacy directories must not be", lp, at("legacyPath"), o.LegacyPath)
		}
	}
	for i, o := range pools {
		if !skip[i] && validPath(o.SnapshotPath) && (lp == o.SnapshotPath || within(o.SnapshotPath, lp)) {
			return fieldErr(field, "%q is inside %s[%d].snapshotPath %q", lp, docField, i, o.SnapshotPath)
		}
	}
	return nil
}

// LegacyVolumePath returns <p.LegacyPath>/<id> after the checks of ResolveIn
// (one real directory entry, no symbolic link out), refusing an id that
// names a directory holding configured storage of any pool of s.
func (s *Set) LegacyVolumePath(p Pool, id string) (string, error) {
	if p.LegacyPath == "" {
		return "", fieldErr("legacyPath", "storage pool %q has none; legacy volumes need the pool's \"legacyPath\" in --datadir", p.Name)
	}
	if err := ValidateID(id); err != nil {
		return "", err
	}
	for i, o := range s.All() {
		for _, f := range []struct{ name, path string }{{"path", o.Path}, {"snapshotPath", o.SnapshotPath}, {"legacyPath", o.LegacyPath}} {
			if f.path == "" || !within(p.LegacyPath, f.path) {
				continue
			}
			first, _, _ := strings.Cut(f.path[len(p.LegacyPath)+1:], "/")
			if first == id {
				return "", fieldErr(idField, "%q is not a legacy volume: %s/%s holds %s[%d].%s %q",
					id, p.LegacyPath, id, docField, i, f.name, f.path)
			}
		}
	}
	return ResolveIn(p.LegacyPath, id)
}
