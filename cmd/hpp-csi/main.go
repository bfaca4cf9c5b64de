// Command hpp-csi is the node-local hostpath CSI driver: one process per
// node serving Identity, Controller and Node on one unix socket, optionally
// registering itself with kubelet and serving /healthz and /metrics. With
// --controller-only it is instead the one cluster-wide endpoint csi-resizer
// talks to: Identity and ControllerExpandVolume, no pools (see
// handlers/controlleronly.go).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/version"
)

func main() {
	o := &options{}
	cmd := newCommand(o, o.Run)
	os.Exit(cli.Main(cmd, goFlagArgs(cmd.Flags(), os.Args[1:]), os.Stderr))
}

// newCommand binds o to hpp-csi's command line; run is o.Run outside tests.
func newCommand(o *options, run func(context.Context) error) *cobra.Command {
	cmd := cli.NewRoot("hpp-csi", "node-local hostpath CSI driver ("+contract.DriverName+")")
	// --version is the KubeVirt plugin's string flag (the vendor version);
	// without a Version cobra adds neither its boolean --version nor -v,
	// which would shadow --v.
	cmd.Version = ""
	o.addFlags(cmd.Flags())
	// Registered now rather than by Execute, so goFlagArgs knows -help.
	cmd.InitDefaultHelpFlag()
	serve := cli.RunE(o.Validate, run, envFlags...)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if o.vendorVersion == printVersion {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get("hpp-csi"))
			return err
		}
		return serve(cmd, args)
	}
	return cmd
}
