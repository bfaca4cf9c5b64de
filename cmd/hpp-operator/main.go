// Command hpp-operator: installs and runs hpp from one HostPathProvisioner resource.
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
	logging        logging.Options
	metricsAddress string
	healthAddress  string
	webhookPort    int
}

func (o *options) validate() error {
	errs := o.logging.Validate()
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a TCP port (1-65535)", o.webhookPort))
	}
	return cli.Usage(errs...)
}

func main() {
	var o options
	cmd := cli.NewRoot("hpp-operator", "installs and runs hpp from one HostPathProvisioner resource")
	o.logging.AddFlags(cmd.Flags())
	o.addFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		return errors.New("not implemented yet: hpp-operator only parses its configuration so far")
	}
	os.Exit(cli.Main(cmd, os.Args[1:], os.Stderr))
}

func (o *options) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.metricsAddress, "metrics-address", ":8080", "address for Prometheus metrics")
	fs.StringVar(&o.healthAddress, "health-address", ":8081", "address for /healthz and /readyz")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the validating webhook")
}
