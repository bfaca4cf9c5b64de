package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Commander runs a short external command to completion (ctr, ip,
// iptables). Injected so teardown logic can be tested without root.
type Commander interface {
	Run(ctx context.Context, name string, args ...string) (stdout string, err error)
	// RunInput is Run with stdin.
	RunInput(ctx context.Context, stdin string, name string, args ...string) (stdout string, err error)
}

// hostCommander runs commands on this machine.
type hostCommander struct{}

// Run runs name with args; a failure's error carries the command line and
// its stderr.
func (h hostCommander) Run(ctx context.Context, name string, args ...string) (string, error) {
	return h.RunInput(ctx, "", name, args...)
}

// RunInput runs name with args and stdin.
func (hostCommander) RunInput(ctx context.Context, stdin string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=" + hostPath, "HOME=/root"}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
