package grpctest

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestWantCode(t *testing.T) {
	refused := status.Error(codes.InvalidArgument, `name "x" is too long`)
	cases := []struct {
		name  string
		err   error
		parts []string
		want  string // the failure, "" for none
	}{
		{"code and every part", refused, []string{"name", "too long"}, ""},
		{"wrapped status", fmt.Errorf("call: %w", refused), []string{"too long"}, ""},
		{"no error", nil, nil, "no error; want code InvalidArgument"},
		{"not a status", errors.New("plain"), nil, "error plain is not a gRPC status; want code InvalidArgument"},
		{"other code", status.Error(codes.Internal, "boom"), nil, `code = Internal, want InvalidArgument (message "boom")`},
		{"a part missing", refused, []string{"name", "empty", "short"},
			`message "name \"x\" is too long" does not contain ["empty" "short"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			WantCode(r, tc.err, codes.InvalidArgument, tc.parts...)
			if r.failed != tc.want {
				t.Errorf("WantCode failed with %q; want %q", r.failed, tc.want)
			}
		})
	}
}
