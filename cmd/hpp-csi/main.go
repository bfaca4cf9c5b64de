// Command hpp-csi is the node-local hostpath CSI driver: one process per
// node serving Identity, Controller and Node on one unix socket, optionally
// registering itself with kubelet and serving /healthz and /metrics. With
// --controller-only it is instead the one cluster-wide endpoint csi-resizer
// talks to: Identity and ControllerExpandVolume, no pools (see
// driver/controlleronly.go).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/signals"
	"github.com/hostpath-provisioner/hpp/internal/version"
)

func main() {
	cmd := newCommand(func(o *options) error {
		ctx, cancel := signals.Context(context.Background())
		defer cancel()
		return run(ctx, o)
	})
	os.Exit(cli.Main(cmd, goFlagArgs(cmd.Flags(), os.Args[1:]), os.Stderr))
}

// newCommand is hpp-csi's command line; serve runs with the completed
// options.
func newCommand(serve func(*options) error) *cobra.Command {
	o := newOptions()
	cmd := cli.NewRoot("hpp-csi", "node-local hostpath CSI driver (kubevirt.io.hostpath-provisioner)")
	// --version is the KubeVirt plugin's string flag (the vendor version);
	// without a Version cobra adds neither its boolean --version nor -v,
	// which would shadow --v.
	cmd.Version = ""
	o.addFlags(cmd.Flags())
	// Registered now rather than by Execute, so goFlagArgs knows -help.
	cmd.InitDefaultHelpFlag()
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.vendorVersion == printVersion {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Get("hpp-csi"))
			return err
		}
		if err := o.complete(cmd.Flags()); err != nil {
			return err
		}
		return serve(o)
	}
	return cmd
}
