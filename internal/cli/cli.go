// Package cli holds what every hpp binary's main does the same way: a cobra
// root command with --version and logging flags, exit codes that tell a bad
// flag (2) from a failed run (1), and environment fallbacks for flags.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hostpath-provisioner/hpp/internal/version"
)

// UsageError marks a configuration problem: main prints it and exits 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage wraps all problems found in a configuration into one UsageError, so
// the operator sees every mistake at once instead of one per restart.
func Usage(errs ...error) error {
	if err := errors.Join(errs...); err != nil {
		return UsageError{Err: err}
	}
	return nil
}

// NewRoot returns a root command with the shared behaviour. run receives the
// command's context (cancelled on SIGTERM by the caller of Execute).
func NewRoot(component, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:           component,
		Short:         short,
		Version:       version.Get(component).String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return UsageError{Err: fmt.Errorf("unexpected arguments %q: %s takes flags only", args, component)}
			}
			return nil
		},
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return UsageError{Err: err}
	})
	return cmd
}

// Main executes cmd and returns the process exit code, printing the error
// in one place so no binary logs it twice.
func Main(cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	var usage UsageError
	if errors.As(err, &usage) {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n%s\nRun '%s --help' for usage.\n", cmd.Name(), indent(usage.Err), cmd.Name())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.Name(), err)
	return 1
}

func indent(err error) string {
	var out string
	for i, line := range splitLines(err.Error()) {
		if i > 0 {
			out += "\n"
		}
		out += "  - " + line
	}
	return out
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return append(lines, s[start:])
}

// EnvDefault sets flag name from environment variable env when the flag was
// not given on the command line: the command line wins, so a DaemonSet's
// args can override what the operator put in the environment.
func EnvDefault(fs *pflag.FlagSet, name, env string) error {
	v, ok := os.LookupEnv(env)
	if !ok || fs.Changed(name) {
		return nil
	}
	if err := fs.Set(name, v); err != nil {
		return fmt.Errorf("environment %s (for --%s): %w", env, name, err)
	}
	return nil
}
