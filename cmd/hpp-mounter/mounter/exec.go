package mounter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Executor runs an external command and returns its stdout. A non-zero exit
// is an *ExitError carrying the code and stderr.
type Executor interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// ExitError is a command that ran and exited non-zero.
type ExitError struct {
	Cmd    string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s: exit status %d: %s", e.Cmd, e.Code, e.Stderr)
}

// OSExec runs commands from PATH (the image's own xfsprogs and util-linux)
// with a timeout, so a hung probe fails instead of wedging the pod.
type OSExec struct{ Timeout time.Duration }

func (o OSExec) Run(ctx context.Context, name string, args ...string) (string, error) {
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	line := strings.TrimSpace(name + " " + strings.Join(args, " "))
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return stdout.String(), &ExitError{Cmd: line, Code: ee.ExitCode(), Stderr: strings.TrimSpace(stderr.String())}
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", line, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
