// Command hpp-migrate moves legacy hostPath PVs of
// kubevirt.io/hostpath-provisioner onto the CSI driver in place: same PV
// name, same claim (same UID), same directory. See README.md.
//
// Each subcommand has the shape of every hpp command (cli.RunE): its
// options with Validate, naming every problem at once, and one Run under a
// context that SIGTERM or SIGINT cancels (a second signal exits at once;
// every step is safe to repeat, so a new run finishes an interrupted one).
package main

import (
	"os"

	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func main() {
	env := environment{
		failAfter: os.Getenv(envFailAfter),
		stdout:    os.Stdout, stderr: os.Stderr,
		exit:     os.Exit,
		terminal: isTerminal(os.Stderr),
	}
	code := cli.Main(newRootCommand(&env), os.Args[1:], os.Stderr)
	if code == 0 && env.failed {
		code = 1
	}
	os.Exit(code)
}
