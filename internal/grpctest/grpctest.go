// Package grpctest checks, in tests, the gRPC status a call answered.
// hpp-csi's handler tests (cmd/hpp-csi) and test/'s driver tests share it,
// and internal/ is the one place both may import. It is the only package of
// internal/ that reaches gRPC, and only tests import it: test/layout holds
// it to both.
package grpctest

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WantCode fails the test at once unless err is a gRPC status with code and
// a message containing every part: what a test does after a wrong answer
// rarely makes sense.
func WantCode(t testing.TB, err error, code codes.Code, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want code %s", code)
		return
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status; want code %s", err, code)
		return
	}
	if st.Code() != code {
		t.Fatalf("code = %s, want %s (message %q)", st.Code(), code, st.Message())
		return
	}
	missing := slices.DeleteFunc(slices.Clone(parts), func(p string) bool { return strings.Contains(st.Message(), p) })
	if len(missing) > 0 {
		t.Fatalf("message %q does not contain %q", st.Message(), missing)
	}
}
