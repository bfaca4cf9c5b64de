package signals

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestSigtermCancelsContext(t *testing.T) {
	ctx, cancel := Context(context.Background())
	defer cancel()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled after SIGTERM")
	}
}
