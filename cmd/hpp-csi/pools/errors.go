package pools

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/prjquota"
)

// Kind is what a refusal or failure means to the caller. The runtime
// decides it where it knows why (a volume that is not there, a pool that
// is full); the CSI handlers give each Kind its gRPC code, so the runtime
// never speaks gRPC.
type Kind int

const (
	// Internal is a failure that should not have happened.
	Internal Kind = iota
	// Invalid: the request names something that cannot be.
	Invalid
	NotFound
	// Exists: something else already has the name.
	Exists
	// Busy: another operation on the same id is running; retry later.
	Busy
	// Precondition: the node's state must change first.
	Precondition
	// TooLarge: it could never fit.
	TooLarge
	// NoRoom: it does not fit now.
	NoRoom
	// Unavailable: a pool cannot be used now (disk not mounted yet).
	Unavailable
	Deadline
	Canceled
	// Denied: another party (the node that holds a clone's source)
	// refused this node the request; retrying does not help until its
	// policy changes.
	Denied
)

// Error is the runtime's answer to a request it cannot serve, with the
// message the CO sees.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// refuse is a refusal the runtime decided on.
func refuse(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// failed is an operation that failed and should not have, whatever err is.
func failed(op string, err error) error { return refuse(Internal, "%s: %v", op, err) }

// Wrap gives err (not nil) its Kind with op in front of its message; an
// *Error is already decided and passes unchanged. Library errors are
// classified here, once.
func Wrap(op string, err error) *Error {
	var decided *Error
	if errors.As(err, &decided) {
		return decided
	}
	var fieldErr *fieldrule.FieldError
	var notReady *errPoolNotReady
	kind := Internal
	switch {
	case errors.As(err, &fieldErr):
		kind = Invalid
	case errors.As(err, &notReady):
		kind = Unavailable
	case errors.Is(err, dirvol.ErrNotFound):
		kind = NotFound
	case errors.Is(err, context.DeadlineExceeded):
		kind = Deadline
	case errors.Is(err, context.Canceled):
		kind = Canceled
	}
	return &Error{Kind: kind, Msg: op + ": " + err.Error()}
}

// wrap is Wrap for the runtime's own returns, which are error values.
func wrap(op string, err error) error { return Wrap(op, err) }

// KindOf is the Kind of an error the runtime returned; Internal for any
// other error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

func isNotFound(err error) bool { return err != nil && KindOf(err) == NotFound }

// errPoolNotReady is returned while a pool's directory is missing (for
// example its disk is not mounted yet); the CO retries such calls.
type errPoolNotReady struct {
	pool string
	why  string
}

func (e *errPoolNotReady) Error() string {
	return fmt.Sprintf("storage pool %q is not ready: %s", e.pool, e.why)
}

// copyFailed maps a failed copy: a full pool is NoRoom (the CO may retry
// once space is freed), the rest as usual.
func copyFailed(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return refuse(NoRoom, "%s: %v", op, err)
	}
	return wrap(op, err)
}

// quotaFailed maps a failed quota step: no project ID left is NoRoom.
func quotaFailed(op string, err error) error {
	if errors.Is(err, prjquota.ErrNoIDs) {
		return refuse(NoRoom, "%s: %v", op, err)
	}
	return wrap(op, err)
}
