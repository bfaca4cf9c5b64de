// Command hpp-migrate: moves legacy hostPath PVs onto the CSI driver in place.
//
// Only the command line exists so far; the behaviour comes with its own issue.
package main

import (
	"errors"

	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/logging"
)

type options struct {
	logging    logging.Options
	kubeconfig string
	dryRun     bool
	pool       string
}

func (o *options) validate() error {
	errs := o.logging.Validate()
	if o.pool == "" {
		errs = append(errs, errors.New("--storage-pool: required (the CSI pool the legacy directory belongs to)"))
	}
	return cli.Usage(errs...)
}

func main() {
	var o options
	cmd := cli.NewRoot("hpp-migrate", "moves legacy hostPath PVs onto the CSI driver in place")
	o.logging.AddFlags(cmd.Flags())
	o.addFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return errors.New("not implemented yet: hpp-migrate only parses its configuration so far")
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}

func (o *options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster or $KUBECONFIG)")
	fs.BoolVar(&o.dryRun, "dry-run", true, "print the plan without changing anything")
	fs.StringVar(&o.pool, "storage-pool", "", "CSI storage pool that takes over the legacy volumes")
}
