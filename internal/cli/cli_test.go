package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func newTestRoot(run func() error) *cobra.Command {
	cmd := NewRoot("hpp-test", "test")
	var n int
	cmd.Flags().IntVar(&n, "count", 1, "a number")
	cmd.RunE = func(*cobra.Command, []string) error { return run() }
	return cmd
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		run  func() error
		code int
		want string
	}{
		{"ok", nil, func() error { return nil }, 0, ""},
		{"bad flag value", []string{"--count=x"}, nil, 2, "--count"},
		{"unknown flag", []string{"--nope"}, nil, 2, "unknown flag: --nope"},
		{"stray argument", []string{"extra"}, nil, 2, "unexpected arguments"},
		{"usage error from run", nil, func() error { return Usage(errors.New("--a: bad"), errors.New("--b: worse")) }, 2, "  - --b: worse"},
		{"runtime error", nil, func() error { return errors.New("disk on fire") }, 1, "disk on fire"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := tc.run
			if run == nil {
				run = func() error { return nil }
			}
			var stderr bytes.Buffer
			code := Main(newTestRoot(run), tc.args, &stderr)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q does not contain %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout bytes.Buffer
	cmd := newTestRoot(func() error { t.Fatal("run called for --version"); return nil })
	cmd.SetOut(&stdout)
	if code := Main(cmd, []string{"--version"}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !strings.HasPrefix(stdout.String(), "hpp-test ") {
		t.Fatalf("--version printed %q", stdout.String())
	}
}

func TestEnvDefaultCommandLineWins(t *testing.T) {
	t.Setenv("HPP_COUNT", "7")
	cmd := newTestRoot(nil)
	fs := cmd.Flags()
	if err := fs.Parse([]string{"--count=3"}); err != nil {
		t.Fatal(err)
	}
	if err := EnvDefault(fs, "count", "HPP_COUNT"); err != nil {
		t.Fatal(err)
	}
	if v, _ := fs.GetInt("count"); v != 3 {
		t.Fatalf("count = %d, want the command line's 3", v)
	}
	cmd2 := newTestRoot(nil)
	_ = cmd2.Flags().Parse(nil)
	if err := EnvDefault(cmd2.Flags(), "count", "HPP_COUNT"); err != nil {
		t.Fatal(err)
	}
	if v, _ := cmd2.Flags().GetInt("count"); v != 7 {
		t.Fatalf("count = %d, want the environment's 7", v)
	}
	t.Setenv("HPP_COUNT", "seven")
	cmd3 := newTestRoot(nil)
	_ = cmd3.Flags().Parse(nil)
	err := EnvDefault(cmd3.Flags(), "count", "HPP_COUNT")
	if err == nil || !strings.Contains(err.Error(), "HPP_COUNT") {
		t.Fatalf("EnvDefault error = %v, want it to name HPP_COUNT", err)
	}
}
