package csitest

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CallTimeout bounds one call in tests: a hung driver fails the test instead
// of stalling the suite.
const CallTimeout = time.Minute

// Ctx is a context for one call, ended at the test's cleanup at the latest.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), CallTimeout)
	t.Cleanup(cancel)
	return c
}

// WantCode fails the test unless err has code and a message containing every
// part.
func WantCode(t testing.TB, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if err == nil || st.Code() != code {
		t.Errorf("got %v (code %v); want code %v", err, st.Code(), code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q does not mention %q", st.Message(), p)
		}
	}
}
