package pool

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

const nameRule = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 50 characters"

func validatePools(pools []Pool) error {
	if len(pools) == 0 {
		return errors.Join(fieldErr(docField, "lists no pools; it must list at least one, like %s", example))
	}
	return errors.Join(validateEntries(pools, nil)...)
}

// validateEntries checks each pool on its own, then the pools against each
// other (unique names, unique and non-nested paths). Entries in skip failed
// to decode and were already reported.
func validateEntries(pools []Pool, skip map[int]bool) []error {
	var errs []error
	for i, p := range pools {
		if skip[i] {
			continue
		}
		prefix := fmt.Sprintf("%s[%d]", docField, i)
		errs = appendErr(errs, validateName(prefix+".name", p.Name))
		errs = appendErr(errs, cleanPath(prefix+".path", &pools[i].Path))
		errs = append(errs, validateSnapshot(prefix, &pools[i])...)
		if p.LegacyPath != "" {
			_ = cleanPath("", &pools[i].LegacyPath) // reported by checkLegacyPaths
		}
		p = pools[i]
		if p.ReservedBytes < 0 {
			errs = append(errs, fieldErr(prefix+".reservedBytes", "%d must be zero or more", p.ReservedBytes))
		}
		if p.CacheBytes < 0 {
			errs = append(errs, fieldErr(prefix+".cacheBytes", "%d must be zero (the default, %d%% of the pool's filesystem) or more", p.CacheBytes, DefaultCachePercent))
		}
		if !(p.ReservedPercent >= 0 && p.ReservedPercent < 100) {
			errs = append(errs, fieldErr(prefix+".reservedPercent", "%v must be at least 0 and less than 100", p.ReservedPercent))
		}
		errs = append(errs, validateEnforcement(prefix, p)...)
	}
	errs = append(errs, crossCheck(pools, skip)...)
	return append(errs, checkLegacyPaths(pools, skip)...)
}

func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

func validateName(field, name string) error {
	switch {
	case name == "":
		return fieldErr(field, "is required (a pool name: %s)", nameRule)
	case len(name) > MaxNameLen:
		return fieldErr(field, "is %d characters long; at most %d are allowed", len(name), MaxNameLen)
	case !isAlnum(name[0]):
		return fieldErr(field, "%q must start with a letter or digit", name)
	}
	if c, ok := firstBad(name); ok {
		return fieldErr(field, "%q contains %q; a pool name may only contain letters, digits, '.', '_' and '-'", name, c)
	}
	return nil
}

// cleanPath applies the pool-path rule (fieldrule.CheckPoolPath: a
// trailing '/' is accepted and cleaned, as upstream's CRD accepts it) and
// stores the cleaned path, so every comparison below sees one spelling.
func cleanPath(field string, p *string) error {
	c, err := fieldrule.PoolPath(field, *p)
	if err == nil {
		*p = c
	}
	return err
}

// validateSnapshot checks the KubeVirt driver's snapshot fields. They take
// no effect yet, but a configuration that would break once they do is
// refused now rather than on the upgrade that enables them.
func validateSnapshot(prefix string, pp *Pool) []error {
	p := *pp
	var errs []error
	switch p.SnapshotProvider {
	case "", SnapshotProviderReflink:
	default:
		errs = append(errs, fieldErr(prefix+".snapshotProvider", "%q is not a known snapshot provider; the only one is %q", p.SnapshotProvider, SnapshotProviderReflink))
	}
	if p.SnapshotPath == "" {
		return errs
	}
	field := prefix + ".snapshotPath"
	if err := cleanPath(field, &pp.SnapshotPath); err != nil {
		return append(errs, err)
	}
	p.SnapshotPath = pp.SnapshotPath
	if !validPath(p.Path) {
		return errs
	}
	switch {
	case p.SnapshotPath == p.Path:
		errs = append(errs, fieldErr(field, "%q is the pool's path; snapshots need their own directory", p.SnapshotPath))
	case within(p.Path, p.SnapshotPath) && filepath.Dir(p.SnapshotPath) != p.Path:
		// A direct child of path (as the KubeVirt operator configures it)
		// is set aside by name, never listed or deleted as a volume; a
		// deeper one would make its first component look like a volume.
		errs = append(errs, fieldErr(field, "%q is nested below the pool's path %q, where every directory is a volume; put it directly in it (e.g. %s) or beside it (e.g. %s)",
			p.SnapshotPath, p.Path, filepath.Join(p.Path, "snapshots"), filepath.Join(filepath.Dir(p.Path), "snapshots")))
	case within(p.Path, p.SnapshotPath):
		if err := ValidateID(filepath.Base(p.SnapshotPath)); err != nil {
			errs = append(errs, fieldErr(field, "%q: its name inside the pool's path is not usable: %v", p.SnapshotPath, err))
		}
	case within(p.SnapshotPath, p.Path):
		errs = append(errs, fieldErr(field, "%q contains the pool's path %q; snapshots and volumes must not be nested", p.SnapshotPath, p.Path))
	}
	return errs
}

// crossCheck reports each later pool that repeats or nests with an earlier
// one; a nested pool would let one pool's volumes show up in the other.
func crossCheck(pools []Pool, skip map[int]bool) []error {
	var errs []error
	for j := range pools {
		if skip[j] {
			continue
		}
		for i := 0; i < j; i++ {
			if !skip[i] && pools[j].Name != "" && pools[i].Name == pools[j].Name {
				errs = append(errs, fieldErr(fmt.Sprintf("%s[%d].name", docField, j),
					"%q is already used by %s[%d]; pool names must be unique", pools[j].Name, docField, i))
				break
			}
		}
		for i := 0; i < j; i++ {
			if skip[i] {
				continue
			}
			if err := pathConflict(pools, i, j); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	return errs
}

func pathConflict(pools []Pool, i, j int) error {
	a, b := pools[i].Path, pools[j].Path
	if !validPath(a) || !validPath(b) {
		return nil // a bad path is already reported on its own
	}
	field := fmt.Sprintf("%s[%d].path", docField, j)
	switch {
	case a == b:
		return fieldErr(field, "%q is already used by %s[%d]; pool paths must be unique", b, docField, i)
	case within(a, b):
		return fieldErr(field, "%q is inside %s[%d].path %q; pools must not be nested", b, docField, i, a)
	case within(b, a):
		return fieldErr(field, "%q contains %s[%d].path %q; pools must not be nested", b, docField, i, a)
	}
	return nil
}

// within reports whether clean path p lies strictly below clean dir.
func within(dir, p string) bool {
	if dir == string(filepath.Separator) {
		return len(p) > 1 && p[0] == filepath.Separator
	}
	return strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == filepath.Separator
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isNameByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-'
}

// firstBad returns the first character of s outside [A-Za-z0-9._-], as a
// string so a multi-byte or invalid byte prints readably with %q.
func firstBad(s string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			_, size := utf8.DecodeRuneInString(s[i:])
			return s[i : i+size], true
		}
	}
	return "", false
}

// validPath reports whether p, already cleaned, keeps the pool-path rule.
func validPath(p string) bool { _, err := fieldrule.PoolPath("", p); return err == nil }

// validateEnforcement checks enforceSize and projectIDs. A shared pool
// cannot enforce: every node would hand out project IDs on its own, and
// project quotas are a property of the local filesystem, which a shared
// pool's storage (NFS and the like) does not give each node.
func validateEnforcement(prefix string, p Pool) []error {
	var errs []error
	if p.EnforceSize && p.Shared {
		errs = append(errs, fieldErr(prefix+".enforceSize", "cannot be true on a shared pool: project quotas are set on the node's local XFS or ext4 filesystem, and the nodes of a shared pool would each hand out project IDs"))
	}
	r := p.ProjectIDs
	if r == (IDRange{}) {
		return errs
	}
	field := prefix + ".projectIDs"
	if !p.EnforceSize {
		return append(errs, fieldErr(field, "is set but enforceSize is not true; project IDs are only given to the volumes of an enforcing pool"))
	}
	switch {
	case r.First == 0:
		errs = append(errs, fieldErr(field+".first", "must be at least 1: project 0 is the filesystem's default project, which every file outside a project belongs to"))
	case r.Last > MaxProjectID:
		errs = append(errs, fieldErr(field+".last", "%d is above %d, the largest project ID (2^32-1 means none)", r.Last, uint32(MaxProjectID)))
	case r.First > r.Last:
		errs = append(errs, fieldErr(field, "first %d is greater than last %d", r.First, r.Last))
	}
	return errs
}
