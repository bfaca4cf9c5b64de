package handlers

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
)

// Handlers return a *callError (through the helpers below) for every
// refusal they decide on, and toStatus maps the pool runtime's answers
// (and whatever else is left) once, at the boundary, so a plain Go error
// never reaches the CO as codes.Unknown. GRPCStatus is the one place a
// gRPC status is built.

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

func internal(op string, err error) error { return errCode(codes.Internal, "%s: %v", op, err) }

// kindCodes is the gRPC code of each kind of the pool runtime's answers.
var kindCodes = map[pools.Kind]codes.Code{
	pools.Internal:     codes.Internal,
	pools.Invalid:      codes.InvalidArgument,
	pools.NotFound:     codes.NotFound,
	pools.Exists:       codes.AlreadyExists,
	pools.Busy:         codes.Aborted,
	pools.Precondition: codes.FailedPrecondition,
	pools.TooLarge:     codes.OutOfRange,
	pools.NoRoom:       codes.ResourceExhausted,
	pools.Unavailable:  codes.Unavailable,
	pools.Deadline:     codes.DeadlineExceeded,
	pools.Canceled:     codes.Canceled,
	pools.Denied:       codes.PermissionDenied,
}

// toStatus gives err a gRPC code if it does not have one yet: the pool
// runtime's answers keep their message, anything else is prefixed with op.
func toStatus(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	answer := pools.Wrap(op, err)
	return errCode(kindCodes[answer.Kind], "%s", answer.Msg)
}

func isNotFound(err error) bool {
	return status.Code(toStatus("", err)) == codes.NotFound
}
