package pool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

const idField = "volume id"

// reservedID says why a directory entry is never a volume: the ext4/XFS
// recovery directory, and "csi", the directory that deployments put a
// pool's CSI volumes in below the host pool directory, which is also the
// legacy provisioner's PV_DIR.
func reservedID(id string) (string, bool) {
	switch id {
	case "lost+found":
		return "it is the filesystem's recovery directory", true
	case "csi":
		return "it is the directory that holds a pool's CSI volumes", true
	}
	return "", false
}

// ValidateID checks that id can be used as exactly one directory entry in a
// pool: [A-Za-z0-9._-], not starting with '.' (hpp's private areas are hidden
// directories), at most MaxIDLen bytes, and not a reserved name.
func ValidateID(id string) error {
	if id == "" {
		return fieldErr(idField, "must not be empty")
	}
	if len(id) > MaxIDLen {
		return fieldErr(idField, "is %d bytes long; at most %d are allowed (one directory entry)", len(id), MaxIDLen)
	}
	if why, ok := reservedID(id); ok {
		return fieldErr(idField, "%q is reserved: %s", id, why)
	}
	if strings.IndexByte(id, 0) >= 0 {
		return fieldErr(idField, "%q must not contain a NUL byte", id)
	}
	if strings.ContainsRune(id, '/') {
		return fieldErr(idField, "%q must be a single directory name without '/'", id)
	}
	if id[0] == '.' {
		return fieldErr(idField, "%q must not start with '.' (hidden names such as \".\", \"..\" and hpp's own \".hpp-*\" directories are not volumes)", id)
	}
	if c, ok := firstBad(id); ok {
		return fieldErr(idField, "%q contains %q; only letters, digits, '.', '_' and '-' are allowed", id, c)
	}
	return nil
}

// ResolveIn returns root/id after checking that it is, and resolves to, a
// direct child of root: id must pass ValidateID, and when it exists on disk it
// must not be a symbolic link (volumes are always real directories, so a link
// there was planted) and must resolve inside the symlink-resolved root. A
// missing root or id is fine: the caller is about to create it.
func ResolveIn(root, id string) (string, error) {
	if err := validateRoot(root); err != nil {
		return "", err
	}
	if err := ValidateID(id); err != nil {
		return "", err
	}
	joined := filepath.Join(root, id)
	realRoot, err := filepath.EvalSymlinks(root)
	if errors.Is(err, fs.ErrNotExist) {
		return joined, nil
	}
	if err != nil {
		return "", fmt.Errorf("root %q: resolving symbolic links: %w", root, err)
	}
	fi, err := os.Lstat(joined)
	if errors.Is(err, fs.ErrNotExist) {
		return joined, nil
	}
	if err != nil {
		return "", fmt.Errorf("volume id %q: %w", id, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return "", symlinkError(realRoot, joined, id)
	}
	resolved, err := filepath.EvalSymlinks(joined)
	if err != nil {
		return "", fmt.Errorf("volume id %q: resolving symbolic links: %w", id, err)
	}
	// id itself is not a link, so this only differs if root was swapped
	// underneath us between the two lookups.
	if resolved != filepath.Join(realRoot, id) {
		return "", fieldErr(idField, "%q resolves outside the pool %q (to %q)", id, root, resolved)
	}
	return joined, nil
}

func symlinkError(realRoot, joined, id string) error {
	target, err := filepath.EvalSymlinks(joined)
	if err != nil {
		// Dangling or looping: where it points does not matter, it is
		// refused either way.
		return fieldErr(idField, "%q is a symbolic link that cannot be resolved (%v); volumes are always real directories", id, cause(err))
	}
	if target == realRoot {
		return fieldErr(idField, "%q is a symbolic link to the pool directory itself; volumes are always real directories", id)
	}
	if !within(realRoot, target) {
		return fieldErr(idField, "%q is a symbolic link that resolves outside the pool (to %q); volumes are always real directories", id, target)
	}
	return fieldErr(idField, "%q is a symbolic link (to %q); volumes are always real directories, so hpp refuses to follow it", id, target)
}

func validateRoot(root string) error { return fieldrule.CheckAbsPath("root", root, true) }

// cause drops the path from a *fs.PathError so messages do not repeat it.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
