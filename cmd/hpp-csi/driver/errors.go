package driver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Handlers return errors built with these helpers; toStatus maps whatever is
// left (library errors) to a gRPC code once, at the boundary, so a plain Go
// error never reaches the CO as codes.Unknown.

func invalidArg(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func notFound(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

func internal(op string, err error) error {
	return status.Errorf(codes.Internal, "%s: %v", op, err)
}

// errPoolNotReady is returned while a pool's directory is missing (for
// example its disk is not mounted yet); the CO retries Unavailable calls.
type errPoolNotReady struct {
	pool   string
	reason string
}

func (e *errPoolNotReady) Error() string {
	return fmt.Sprintf("storage pool %q is not ready: %s", e.pool, e.reason)
}

// toStatus gives err a gRPC code if it does not have one yet.
func toStatus(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fieldErr *pool.FieldError
	var notReady *errPoolNotReady
	switch {
	case errors.As(err, &fieldErr):
		return status.Errorf(codes.InvalidArgument, "%s: %v", op, err)
	case errors.As(err, &notReady):
		return status.Errorf(codes.Unavailable, "%s: %v", op, err)
	case errors.Is(err, dirvol.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s: %v", op, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", op, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", op, err)
	}
	return internal(op, err)
}

func alreadyExists(format string, args ...any) error {
	return status.Errorf(codes.AlreadyExists, format, args...)
}

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
