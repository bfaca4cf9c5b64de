package pool

import "github.com/hostpath-provisioner/hpp/internal/fieldrule"

// fieldErr is fieldrule.Errorf: every problem pool reports is a
// *fieldrule.FieldError naming the --datadir field or the value at fault.
func fieldErr(field, format string, args ...any) *fieldrule.FieldError {
	return fieldrule.Errorf(field, format, args...)
}
