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
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const component = "hpp-legacy"

func main() {
	o := &options{}
	os.Exit(cli.Main(newCommand(o, o.Run), os.Args[1:], os.Stderr))
}

// newCommand binds o to the command line; run is o.Run outside tests.
func newCommand(o *options, run func(context.Context) error) *cobra.Command {
	cmd := cli.NewRoot(component, "legacy hostPath provisioner ("+contract.LegacyProvisionerName+")")
	o.addFlags(cmd.Flags())
	cmd.RunE = cli.RunE(o.Validate, run, envFlags...)
	return cmd
}
