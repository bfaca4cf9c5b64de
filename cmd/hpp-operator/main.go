// Command hpp-operator installs and runs hpp from one HostPathProvisioner
// resource: a controller-runtime manager with the reconciler (package
// controller) and the validating webhook (package webhook).
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func main() {
	o := &options{}
	os.Exit(cli.Main(newCommand(o, o.Run, os.Getenv), os.Args[1:], os.Stderr))
}

// newCommand binds o to the command line and getenv (the environment is
// read once, before Validate); run is o.Run outside tests.
func newCommand(o *options, run func(context.Context) error, getenv func(string) string) *cobra.Command {
	cmd := cli.NewRoot("hpp-operator", "installs and runs hpp from one HostPathProvisioner resource")
	o.addFlags(cmd.Flags())
	validate := func() error {
		o.env = readEnvironment(getenv)
		return o.Validate()
	}
	cmd.RunE = cli.RunE(validate, run)
	return cmd
}
