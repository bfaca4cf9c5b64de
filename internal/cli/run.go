package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/hostpath-provisioner/hpp/internal/signals"
)

// EnvVar names the environment variable that fills a flag the command line
// did not give (the command line wins).
type EnvVar struct{ Flag, Env string }

// ApplyEnv fills the flags of env from the environment, returning every
// variable that did not parse.
func ApplyEnv(cmd *cobra.Command, env ...EnvVar) []error {
	var errs []error
	for _, e := range env {
		if err := EnvDefault(cmd.Flags(), e.Flag, e.Env); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// RunE is the one shape of every hpp command (docs/design.md): the flags are
// in an options struct; the environment fills what the command line left
// out; validate names every problem at once; then run does the work under
// a context that SIGTERM or SIGINT cancels.
func RunE(validate func() error, run func(context.Context) error, env ...EnvVar) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		errs := ApplyEnv(cmd, env...)
		if err := validate(); err != nil {
			var usage UsageError
			if errors.As(err, &usage) {
				err = usage.Err
			}
			errs = append(errs, err)
		}
		if err := Usage(errs...); err != nil {
			return err
		}
		ctx, cancel := signals.Context(cmd.Context())
		defer cancel()
		return run(ctx)
	}
}
