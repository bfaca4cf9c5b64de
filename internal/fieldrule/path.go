package fieldrule

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The pool-path rule. A pool's directory (the CR's storagePools[].path and
// pathConfig.path, --datadir's path, snapshotPath and legacyPath,
// hpp-legacy's PV_DIR) must be
//
//   - set, without a NUL byte, and absolute;
//   - free of ".." elements: a pool never leaves the directory it names
//     (the API server refuses such a hostPath volume too, so no CR that
//     upstream's operator ran has one);
//   - at most MaxPathLen bytes as written (upstream's webhook limit), so
//     that <path>/<volume id> stays well inside PATH_MAX;
//   - below "/" once cleaned: "/" is the whole root filesystem.
//
// Any other spelling of a directory, such as a trailing "/", "//" or ".",
// is accepted and cleaned (filepath.Clean) by whoever uses the path.
// Upstream's CRD and webhook accept "/var/hpvolumes/" and its pods run with
// it, so a CR that has one keeps working; hpp-csi refusing the same
// directory that the CR validation accepted is what this rule ends.
//
// A relative --datadir path is the KubeVirt driver's form (relative to the
// driver's working directory): internal/pool joins it to that directory
// first, then applies this rule.

// MaxPathLen bounds a pool path, as written.
const MaxPathLen = 255

// PathProblem names the part of a path rule a path breaks; callers that
// report in another vocabulary (the CRD validation's field.Error types)
// switch on it instead of re-checking the path.
type PathProblem int

// The problems, in the order they are checked: a path has at most the
// first one it breaks.
const (
	PathOK PathProblem = iota
	PathMissing
	PathNUL
	PathRelative
	PathBackstep
	PathTooLong
	PathRoot
)

// CheckPoolPath applies the pool-path rule to p. It returns p cleaned, or
// the first problem and why, worded to follow the field's name.
func CheckPoolPath(p string) (clean string, problem PathProblem, reason string) {
	switch {
	case p == "":
		return "", PathMissing, "must not be empty"
	case strings.IndexByte(p, 0) >= 0:
		return "", PathNUL, fmt.Sprintf("%q must not contain a NUL byte", p)
	case !filepath.IsAbs(p):
		return "", PathRelative, fmt.Sprintf("%q must be an absolute path", p)
	case HasBackstep(p):
		return "", PathBackstep, fmt.Sprintf("%q must not contain a '..' element", p)
	case len(p) > MaxPathLen:
		return "", PathTooLong, fmt.Sprintf("is %d characters long; at most %d are allowed", len(p), MaxPathLen)
	}
	clean = filepath.Clean(p)
	if clean == "/" {
		return "", PathRoot, fmt.Sprintf("%q is the whole root filesystem; a pool must be a directory below it", p)
	}
	return clean, PathOK, ""
}

// PoolPath is CheckPoolPath as a *FieldError naming field: it returns the
// cleaned path, which the caller uses from then on.
func PoolPath(field, p string) (string, error) {
	clean, problem, reason := CheckPoolPath(p)
	if problem != PathOK {
		return "", &FieldError{Field: field, Reason: reason}
	}
	return clean, nil
}

// AbsPath is the part of the pool-path rule that holds for any directory
// hpp is handed from outside (a CSI request's target path, which kubelet
// chooses): set, no NUL byte, absolute, no ".." element; any length, and
// "/" is left to the caller. It returns the path cleaned.
func AbsPath(field, p string) (string, error) {
	clean, problem, reason := CheckPoolPath(p)
	switch problem {
	case PathOK:
		return clean, nil
	case PathTooLong, PathRoot:
		return filepath.Clean(p), nil
	}
	return "", &FieldError{Field: field, Reason: reason}
}

// CheckAbsPath reports, as a *FieldError naming field, a path that is empty,
// holds a NUL byte or is not absolute and, when clean is set, one that
// filepath.Clean would change. It is for directories hpp's own code hands
// over (a pool's root, a snapshot area), which are already clean; a path a
// user writes goes through PoolPath or AbsPath instead.
func CheckAbsPath(field, p string, clean bool) error {
	_, problem, reason := CheckPoolPath(p)
	switch problem {
	case PathMissing, PathNUL, PathRelative:
		return &FieldError{Field: field, Reason: reason}
	}
	if c := filepath.Clean(p); clean && c != p {
		return Errorf(field, "%q must be a clean path (%q)", p, c)
	}
	return nil
}

// HasBackstep reports whether p has a ".." element.
func HasBackstep(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}
