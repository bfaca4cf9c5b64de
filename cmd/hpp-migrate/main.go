// Command hpp-migrate moves legacy hostPath PVs of
// kubevirt.io/hostpath-provisioner onto the CSI driver in place: same PV
// name, same claim (same UID), same directory. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := environment{
		failAfter: os.Getenv(envFailAfter),
		stdout:    os.Stdout, stderr: os.Stderr,
		exit:     os.Exit,
		terminal: isTerminal(os.Stderr),
	}
	cmd := newRootCommand(&env)
	cmd.SetContext(ctx)
	code := cli.Main(cmd, os.Args[1:], os.Stderr)
	if code == 0 && env.failed {
		code = 1
	}
	stop()
	os.Exit(code)
}
