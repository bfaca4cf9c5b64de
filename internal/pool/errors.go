package pool

import (
	"path/filepath"
	"strings"
)

// FieldError is a validation problem with one named input: a config field
// such as "datadir[1].path", a request field such as
// "parameters.storagePool", or a value such as "volume id". Callers map it to
// a user-facing error (InvalidArgument, exit code 2) without parsing text.
type FieldError struct {
	Field  string
	Reason string
}

// Error returns "<field>: <reason>".
func (e *FieldError) Error() string {
	return e.Field + ": " + e.Reason
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: sprintf(format, args...)}
}

// CheckAbsPath reports, as a *FieldError naming field, a path that is empty,
// holds a NUL byte or is not absolute and, when clean is set, one that
// filepath.Clean would change. It is the one path check the internal
// packages share, so every package words the same problem the same way.
func CheckAbsPath(field, p string, clean bool) error {
	switch {
	case p == "":
		return fieldErr(field, "must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return fieldErr(field, "%q must not contain a NUL byte", p)
	case !filepath.IsAbs(p):
		return fieldErr(field, "%q must be an absolute path", p)
	case clean && filepath.Clean(p) != p:
		return fieldErr(field, "%q must be a clean path (%q)", p, filepath.Clean(p))
	}
	return nil
}
