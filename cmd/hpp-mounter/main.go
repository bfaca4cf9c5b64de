// Command hpp-mounter: mounts a pool PVC as a storage pool directory on this node.
//
// Only the command line exists so far; the behaviour comes with its own issue.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/logging"
)

type options struct {
	logging  logging.Options
	source   string
	target   string
	nodeName string
}

func (o *options) validate() error {
	errs := o.logging.Validate()
	if o.source == "" {
		errs = append(errs, errors.New("--source: required (the pool PVC's device or directory)"))
	}
	if o.target == "" || o.target[0] != '/' {
		errs = append(errs, fmt.Errorf("--target: %q must be an absolute path", o.target))
	}
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name: required (env NODE_NAME)"))
	}
	return cli.Usage(errs...)
}

func main() {
	var o options
	cmd := cli.NewRoot("hpp-mounter", "mounts a pool PVC as a storage pool directory on this node")
	o.logging.AddFlags(cmd.Flags())
	o.addFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return errors.New("not implemented yet: hpp-mounter only parses its configuration so far")
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}

func (o *options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.source, "source", "", "the pool PVC's block device or mounted directory")
	fs.StringVar(&o.target, "target", "", "host directory where the pool appears")
	fs.StringVar(&o.nodeName, "node-name", "", "this node's name")
}
