package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/logging"
)

type options struct {
	logging logging.Options
	// Upstream's flags, same names and defaults.
	source    string
	mountPath string
	hostPath  string
	unmount   bool
	// hpp's own.
	poolName       string
	nodeName       string
	keepMount      bool
	interval       time.Duration
	healthAddress  string
	terminationLog string
	enforceSize    bool

	// refusal is what Run refused with (exit code 3), if it did.
	refusal error
}

// envFlags fill the flags the command line did not give.
var envFlags = []cli.EnvVar{{Flag: "node-name", Env: "NODE_NAME"}}

func (o *options) addFlags(cmd *cobra.Command) {
	// Persistent, so the cleanup Job may run `unmount` with the mounter
	// Deployment's own argument list.
	fs := cmd.PersistentFlags()
	o.logging.AddFlags(fs)
	fs.StringVar(&o.source, "storagePoolPath", "/source", "the pool PVC in this container: its mounted directory or its block device")
	fs.StringVar(&o.mountPath, "mountPath", "", "host path where the pool appears: <pool path>/csi")
	fs.StringVar(&o.hostPath, "hostPath", "/", "where the host's root filesystem is in this container (mounted with Bidirectional propagation)")
	fs.BoolVar(&o.unmount, "unmount", false, "unmount --mountPath and exit (as the unmount subcommand)")
	fs.StringVar(&o.poolName, "pool-name", "", "the pool's name, written into the pool marker")
	fs.StringVar(&o.nodeName, "node-name", "", "this node's name, written into the pool marker (env NODE_NAME)")
	fs.BoolVar(&o.keepMount, "keep-mount", false, "on SIGTERM leave the pool mounted (rolling update of the mounter)")
	fs.DurationVar(&o.interval, "check-interval", 10*time.Second, "how often the mount is checked")
	fs.StringVar(&o.healthAddress, "health-address", ":8081", "address of /healthz and /readyz; empty disables")
	fs.BoolVar(&o.enforceSize, "enforce-size", false, "the pool enforces volume sizes with project quotas: a block PVC's XFS is mounted with prjquota (a filesystem PVC keeps the mount options of its StorageClass)")
	fs.StringVar(&o.terminationLog, "termination-log", "/dev/termination-log", "file that gets a refusal's message (shown in the pod status)")
}

// Validate checks every flag at once.
func (o *options) Validate() error {
	errs := o.logging.Validate()
	if err := fieldrule.CheckAbsPath("--mountPath", o.mountPath, true); err != nil {
		errs = append(errs, err)
	} else if o.mountPath == "/" {
		errs = append(errs, errors.New("--mountPath: must not be / (the pool target is <pool path>/csi)"))
	}
	if err := fieldrule.CheckAbsPath("--hostPath", o.hostPath, true); err != nil {
		errs = append(errs, err)
	}
	if err := fieldrule.CheckAbsPath("--storagePoolPath", o.source, true); err != nil {
		errs = append(errs, err)
	}
	if o.interval <= 0 {
		errs = append(errs, fmt.Errorf("--check-interval: %v must be positive", o.interval))
	}
	return cli.Usage(errs...)
}
