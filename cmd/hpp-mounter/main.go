// Command hpp-mounter mounts a pool PVC as a storage pool directory on this
// node; README.md in this directory is its contract with the operator.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-mounter/mounter"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

// exitRefused is the exit code of a refusal (see README.md): a state
// hpp-mounter will not change, distinct from an error a retry may fix.
const exitRefused = 3

// commandTimeout bounds each blkid and mkfs.xfs run.
const commandTimeout = 5 * time.Minute

func main() {
	os.Exit(run(os.Args[1:]))
}

// run is main's exit code for args: a refusal exits 3 with its message in
// the termination log.
func run(args []string) int {
	o := &options{}
	code := cli.Main(newCommand(o, o.Run), args, os.Stderr)
	if o.refusal != nil {
		o.writeTerminationLog(o.refusal)
		return exitRefused
	}
	return code
}

// newCommand binds o to the command line; run is o.Run outside tests.
func newCommand(o *options, run func(context.Context) error) *cobra.Command {
	root := cli.NewRoot("hpp-mounter", "mounts a pool PVC as a storage pool directory on this node")
	o.addFlags(root)
	root.RunE = cli.RunE(o.Validate, run, envFlags...)
	unmount := &cobra.Command{
		Use:   "unmount",
		Short: "unmount the pool target until it is no longer a mount point (cleanup Jobs); safe to run twice",
		Args:  cobra.NoArgs,
		RunE: cli.RunE(o.Validate, func(ctx context.Context) error {
			o.unmount = true
			return run(ctx)
		}, envFlags...),
	}
	root.AddCommand(unmount)
	return root
}

// Run mounts and watches the pool until ctx is cancelled, or unmounts it
// (--unmount, the unmount subcommand). The options are validated.
func (o *options) Run(ctx context.Context) error {
	if o.unmount {
		return o.runUnmount()
	}
	err := o.runMount(ctx)
	if mounter.IsRefused(err) {
		o.refusal = err
	}
	return err
}

func (o *options) runMount(ctx context.Context) error {
	log, err := o.logging.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	var health net.Listener
	if o.healthAddress != "" {
		if health, err = net.Listen("tcp", o.healthAddress); err != nil {
			return fmt.Errorf("--health-address: %w", err)
		}
	}
	exec := mounter.OSExec{Timeout: commandTimeout}
	m := mounter.New(mounter.Config{Source: o.source, HostRoot: o.hostPath, Target: o.mountPath, Pool: o.poolName, Node: o.nodeName},
		mounter.LinuxSys{}, mounter.BlkidProber{Exec: exec}, mounter.MkfsXFS{Exec: exec}, log)
	log.Info("hpp-mounter starting", zap.String("storagePoolPath", o.source), zap.String("mountPath", o.mountPath),
		zap.String("hostPath", o.hostPath), zap.String("pool", o.poolName), zap.Bool("keepMount", o.keepMount))
	return m.Run(ctx, mounter.RunOptions{Interval: o.interval, KeepMount: o.keepMount, Health: health})
}

func (o *options) runUnmount() error {
	log, err := o.logging.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	return mounter.Peel(mounter.LinuxSys{}, o.hostPath, o.mountPath, log)
}

// writeTerminationLog puts the refusal where the kubelet shows it in the
// pod's status. Outside a pod the file does not exist, and stderr already
// has the message.
func (o *options) writeTerminationLog(err error) {
	if o.terminationLog == "" {
		return
	}
	f, ferr := os.OpenFile(o.terminationLog, os.O_WRONLY|os.O_TRUNC, 0)
	if ferr != nil {
		return
	}
	_, _ = f.WriteString(err.Error())
	_ = f.Close()
}
