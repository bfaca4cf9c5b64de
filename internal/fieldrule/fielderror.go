// Package fieldrule holds what every hpp component checks about its inputs
// the same way: FieldError, the error that names the field at fault, and
// the rules for paths (path.go). It is the one place these rules are
// written; the CRD validation (internal/api/v1beta1), the operator's
// webhook, hpp-csi's --datadir (internal/pool), hpp-legacy's PV_DIR and
// the internal packages call it rather than spell a rule again.
package fieldrule

import "fmt"

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

// Errorf returns a *FieldError naming field, its reason formatted as
// fmt.Sprintf does; without args the format is the reason as written.
func Errorf(field, format string, args ...any) *FieldError {
	if len(args) == 0 {
		return &FieldError{Field: field, Reason: format}
	}
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
