// Command hpp-legacy is the legacy (pre-CSI) hostPath provisioner
// kubevirt.io/hostpath-provisioner. It runs as a DaemonSet: one process per
// node, each provisioning the claims that belong to its node as directories
// in PV_DIR.
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/signals"
)

const component = "hpp-legacy"

func main() {
	os.Exit(cli.Main(newCommand(), os.Args[1:], os.Stderr))
}

func newCommand() *cobra.Command {
	var opts options
	cmd := cli.NewRoot(component, "legacy hostPath provisioner ("+provisionerName+")")
	opts.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		errs := applyEnv(cmd.Flags())
		errs = append(errs, opts.validate()...)
		if err := cli.Usage(errs...); err != nil {
			return err
		}
		ctx, cancel := signals.Context(context.Background())
		defer cancel()
		return run(ctx, opts)
	}
	return cmd
}
