package driver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// Handlers return a *callError (through the helpers below) for every
// refusal they decide on, and toStatus maps whatever else is left (library
// errors) once, at the boundary, so a plain Go error never reaches the CO
// as codes.Unknown. GRPCStatus is the one place a gRPC status is built.

// callError is a handler's answer with the gRPC code it carries.
type callError struct {
	code codes.Code
	msg  string
}

func (e *callError) Error() string { return e.msg }

// GRPCStatus lets grpc (and status.FromError) see the code.
func (e *callError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

func errCode(code codes.Code, format string, args ...any) error {
	return &callError{code: code, msg: fmt.Sprintf(format, args...)}
}

func invalidArg(format string, args ...any) error {
	return errCode(codes.InvalidArgument, format, args...)
}

func notFound(format string, args ...any) error { return errCode(codes.NotFound, format, args...) }

func alreadyExists(format string, args ...any) error {
	return errCode(codes.AlreadyExists, format, args...)
}

func aborted(format string, args ...any) error { return errCode(codes.Aborted, format, args...) }

func failedPrecondition(format string, args ...any) error {
	return errCode(codes.FailedPrecondition, format, args...)
}

func internal(op string, err error) error { return errCode(codes.Internal, "%s: %v", op, err) }

// errPoolNotReady is returned while a pool's directory is missing (for
// example its disk is not mounted yet); the CO retries Unavailable calls.
type errPoolNotReady struct {
	pool   string
	reason string
}

func (e *errPoolNotReady) Error() string {
	return fmt.Sprintf("storage pool %q is not ready: %s", e.pool, e.reason)
}

// toStatus gives err a gRPC code if it does not have one yet, prefixing
// the message with op.
func toStatus(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fieldErr *fieldrule.FieldError
	var notReady *errPoolNotReady
	code := codes.Internal
	switch {
	case errors.As(err, &fieldErr):
		code = codes.InvalidArgument
	case errors.As(err, &notReady):
		code = codes.Unavailable
	case errors.Is(err, dirvol.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return errCode(code, "%s: %v", op, err)
}

func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
