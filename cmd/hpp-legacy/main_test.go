package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

// clearEnv unsets the variables hpp-legacy reads, so the host's own do not
// leak into a test.
func clearEnv(t *testing.T) {
	for _, m := range envFlags {
		t.Setenv(m.Env, "")
	}
}

// noRun stands for Options.Run where a test only parses and validates.
func noRun(context.Context) error { return errors.New("Run called") }

func TestBadEnvironmentStopsWithUsageError(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"nothing set", nil, nil, []string{
			"NODE_NAME (--node-name): required: the name of the node this process runs on (from the pod's spec.nodeName)",
			"PV_DIR (--pv-dir): required: the directory on the node that holds the volumes",
		}},
		{"bad values", map[string]string{"NODE_NAME": "Node_1", "PV_DIR": "var/hpvolumes", "USE_NAMING_PREFIX": "yes"}, nil, []string{
			`NODE_NAME (--node-name): "Node_1" is not a node name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters`,
			`PV_DIR (--pv-dir): "var/hpvolumes" must be an absolute path`,
			`USE_NAMING_PREFIX (--use-naming-prefix): "yes" is neither true nor false`,
		}},
		{"root dir", map[string]string{"NODE_NAME": "n1", "PV_DIR": "/"}, nil, []string{
			`PV_DIR (--pv-dir): "/" is the whole root filesystem; a pool must be a directory below it`,
		}},
		{"flags", map[string]string{"NODE_NAME": "n1", "PV_DIR": "/var/hpvolumes"},
			[]string{"--reserved-bytes=lots", "--worker-threads=0", "--reserved-percent=100"}, []string{
				`--reserved-bytes/--reserved-percent: reserved bytes "lots" is not a quantity such as 10Gi`,
				"--worker-threads: 0 must be at least 1",
			}},
		{"percent", map[string]string{"NODE_NAME": "n1", "PV_DIR": "/var/hpvolumes"},
			[]string{"--reserved-percent=100"}, []string{
				"--reserved-bytes/--reserved-percent: headroom: reserved percent 100 must be at least 0 and less than 100",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			code := cli.Main(newCommand(&options{}, noRun), tt.args, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestOptionsFromEnvironment(t *testing.T) {
	for _, tt := range []struct {
		value  string
		prefix bool
	}{{"true", true}, {"TRUE", true}, {"True", true}, {"false", false}, {"FALSE", false}, {"", false}} {
		clearEnv(t)
		t.Setenv("NODE_NAME", "node-1")
		t.Setenv("PV_DIR", "/var/hpvolumes/")
		t.Setenv("USE_NAMING_PREFIX", tt.value)
		var o options
		cmd := cli.NewRoot(component, "")
		o.addFlags(cmd.Flags())
		if errs := cli.ApplyEnv(cmd, envFlags...); errs != nil {
			t.Fatal(errs)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("USE_NAMING_PREFIX=%q: %v", tt.value, err)
		}
		if o.NodeName != "node-1" || o.PVDir != "/var/hpvolumes" || o.prefix != tt.prefix {
			t.Errorf("USE_NAMING_PREFIX=%q: node %q, dir %q, prefix %v", tt.value, o.NodeName, o.PVDir, o.prefix)
		}
	}
}

func TestCommandLineWinsOverEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv("NODE_NAME", "from-env")
	var o options
	cmd := cli.NewRoot(component, "")
	o.addFlags(cmd.Flags())
	if err := cmd.Flags().Parse([]string{"--node-name=from-flag", "--pv-dir=/x", "--reserved-bytes=1Gi", "--reserved-percent=5"}); err != nil {
		t.Fatal(err)
	}
	if errs := cli.ApplyEnv(cmd, envFlags...); errs != nil {
		t.Fatal(errs)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.NodeName != "from-flag" || o.headroom != (capacity.Headroom{Bytes: 1 << 30, Percent: 5}) {
		t.Errorf("node %q, headroom %+v", o.NodeName, o.headroom)
	}
}
