package pool

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
