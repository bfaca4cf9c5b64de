// Command hpp-csi is the node-local hostpath CSI driver: one process per
// node serving Identity, Controller and Node on one unix socket, optionally
// registering itself with kubelet and serving /healthz and /metrics.
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/signals"
)

func main() {
	o := newOptions()
	cmd := cli.NewRoot("hpp-csi", "node-local hostpath CSI driver (kubevirt.io.hostpath-provisioner)")
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.complete(cmd.Flags()); err != nil {
			return err
		}
		ctx, cancel := signals.Context(context.Background())
		defer cancel()
		return run(ctx, o)
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}
