package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// parse runs hpp-csi's command line on args and returns the completed
// options, the exit code and what was printed.
func parse(t *testing.T, args ...string) (*options, int, string) {
	t.Helper()
	var got *options
	o := &options{}
	cmd := newCommand(o, func(context.Context) error { got = o; return nil })
	var out bytes.Buffer
	cmd.SetOut(&out)
	code := cli.Main(cmd, goFlagArgs(cmd.Flags(), args), &out)
	return got, code, out.String()
}

// The KubeVirt DaemonSet's argument list, unchanged.
func TestUpstreamArgumentList(t *testing.T) {
	o, code, out := parse(t, "--drivername=kubevirt.io.hostpath-provisioner", "--v=3", "--endpoint=unix:///csi/csi.sock",
		"--nodeid=node-1", "--version=latest", `--datadir=[{"name":"legacy","path":"/csi-data-dir"}]`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	cfg := o.driverConfig()
	if cfg.DriverName != contract.DriverName || cfg.NodeID != "node-1" || cfg.VendorVersion != "latest" || o.socketPath != "/csi/csi.sock" {
		t.Fatalf("config = %+v socket %q", cfg, o.socketPath)
	}
	if want := []pool.Pool{{Name: "legacy", Path: "/csi-data-dir"}}; !reflect.DeepEqual(cfg.Pools.All(), want) {
		t.Fatalf("pools = %+v, want %+v", cfg.Pools.All(), want)
	}
	if o.logging.Level != "info" {
		t.Fatalf("--v=3 gave log level %q, want info", o.logging.Level)
	}
	if o.metricsAddress != "" || o.metricsTLS != nil {
		t.Fatalf("metrics served (%q, TLS %v) though not asked for", o.metricsAddress, o.metricsTLS)
	}
}

func TestBareVersionPrintsAndExits(t *testing.T) {
	o, code, out := parse(t, "--version")
	if code != 0 || o != nil || !strings.HasPrefix(out, "hpp-csi ") {
		t.Fatalf("--version: exit %d, served %v, printed %q; want hpp's version printed and no driver", code, o != nil, out)
	}
}

func TestVerbosityMapsOntoLogLevel(t *testing.T) {
	base := []string{"--nodeid=n", `--datadir=[{"name":"a","path":"/a"}]`}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "info"},
		{[]string{"--v=0"}, "info"},
		{[]string{"--v=3"}, "info"},
		{[]string{"--v=4"}, "debug"},
		{[]string{"-v=5"}, "debug"}, // Go-flag spelling
		{[]string{"--v=5", "--log-level=warn"}, "warn"},
	} {
		o, code, out := parse(t, append(append([]string{}, base...), tt.args...)...)
		if code != 0 || o.logging.Level != tt.want {
			t.Errorf("%v: exit %d level %v (%s), want level %s", tt.args, code, o, out, tt.want)
		}
	}
	_, code, out := parse(t, append(base, "--v=11")...)
	if code != 2 || !strings.Contains(out, "--v: 11 must be between 0 and 10") {
		t.Errorf("--v=11: exit %d, %q", code, out)
	}
}

// klog's flags, which the KubeVirt plugin registers, are accepted.
func TestKlogFlagsAccepted(t *testing.T) {
	_, code, out := parse(t, "--nodeid=n", `--datadir=[{"name":"a","path":"/a"}]`,
		"--logtostderr=true", "--alsologtostderr", "--vmodule=x=2", "--log_file_max_size=10", "-stderrthreshold=INFO")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestMetricsTLSFlags(t *testing.T) {
	base := []string{"--nodeid=n", `--datadir=[{"name":"a","path":"/a"}]`}
	o, code, out := parse(t, append(base, "--metrics-tls-version=VersionTLS12")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if o.metricsTLS == nil || o.metricsTLS.MinVersion != tls.VersionTLS12 || o.metricsTLS.CertFile != "" || o.metricsAddress != ":8443" {
		t.Fatalf("TLS = %+v at %q; want self-signed TLS 1.2 on :8443", o.metricsTLS, o.metricsAddress)
	}
	o, _, _ = parse(t, append(base, "--metrics-address=127.0.0.1:9000")...)
	if o.metricsTLS != nil || o.metricsAddress != "127.0.0.1:9000" {
		t.Fatalf("plain --metrics-address: TLS %+v at %q; want plain HTTP", o.metricsTLS, o.metricsAddress)
	}
	_, code, out = parse(t, append(base, "--metrics-cert-file=/tls.crt", "--metrics-tls-version=TLS1.3")...)
	for _, want := range []string{
		`--metrics-tls-version: "TLS1.3" is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13`,
		"--metrics-cert-file and --metrics-key-file: give both",
	} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output %q; want %q", code, out, want)
		}
	}
}

func TestRelativePoolPathsFromWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	o, code, out := parse(t, "--nodeid=n", `--datadir=[{"name":"a","path":"a-data-dir/csi","snapshotPath":"a-data-dir/snap","shared":true}]`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	want := []pool.Pool{{Name: "a", Path: dir + "/a-data-dir/csi", SnapshotPath: dir + "/a-data-dir/snap", Shared: true}}
	if got := o.pools.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pools = %+v, want %+v", got, want)
	}
}

func TestGoFlagArgs(t *testing.T) {
	cmd := newCommand(&options{}, func(context.Context) error { return nil })
	got := goFlagArgs(cmd.Flags(), []string{"-nodeid", "-odd-node", "-v=3", "-h", "-help", "--endpoint=/x", "-version", "-unknown", "--", "-v"})
	want := []string{"--nodeid", "-odd-node", "--v=3", "-h", "--help", "--endpoint=/x", "--version", "-unknown", "--", "-v"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("goFlagArgs = %q, want %q", got, want)
	}
}

// --controller-only (csi-resizer's endpoint) needs neither --nodeid nor
// --datadir, and refuses the flags that would do nothing there.
func TestControllerOnlyFlags(t *testing.T) {
	o, code, out := parse(t, "--controller-only", "--endpoint=unix:///csi/csi.sock", "--v=3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if cfg := o.driverConfig(); !cfg.ControllerOnly || len(cfg.Pools.All()) != 0 {
		t.Fatalf("config = %+v, want controller-only without pools", cfg)
	}
	_, code, out = parse(t, "--controller-only", `--datadir=[{"name":"a","path":"/a"}]`, "--check-binding-mode")
	for _, want := range []string{"--datadir: not used with --controller-only", "--check-binding-mode: not used with --controller-only"} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output %q: want 2 and %q", code, out, want)
		}
	}
}

// --peer-address turns cross-node clones on and needs --peer-cert-dir;
// errors name the flag.
func TestPeerFlags(t *testing.T) {
	base := []string{"--nodeid=n", `--datadir=[{"name":"a","path":"/a"}]`}
	o, code, out := parse(t, append(base, "--peer-address=:9443", "--peer-cert-dir=/certs")...)
	if code != 0 || o.peerPort() != "9443" || o.peerCertDir != "/certs" {
		t.Fatalf("exit %d (%s), options %+v", code, out, o)
	}
	o, code, out = parse(t, base...)
	if code != 0 || o.peerAddress != "" {
		t.Fatalf("default: exit %d (%s), peer address %q: want off", code, out, o.peerAddress)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--peer-address=:9443"}, "--peer-cert-dir: required with --peer-address"},
		{[]string{"--peer-cert-dir=/certs"}, "--peer-cert-dir: only used with --peer-address"},
		{[]string{"--peer-ca-bundle=/ca/ca.crt"}, "--peer-ca-bundle: only used with --peer-address"},
		{[]string{"--peer-address=9443", "--peer-cert-dir=/c"}, "--peer-address: \"9443\" is not host:port"},
		{[]string{"--peer-address=:0", "--peer-cert-dir=/c"}, "--peer-address: port \"0\" must be a number"},
		{[]string{"--peer-address=:https", "--peer-cert-dir=/c"}, "--peer-address: port \"https\" must be a number"},
	} {
		_, code, out := parse(t, append(append([]string{}, base...), tt.args...)...)
		if code != 2 || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tt.args, code, out, tt.want)
		}
	}
	_, code, out = parse(t, "--controller-only", "--peer-address=:9443")
	if code != 2 || !strings.Contains(out, "--peer-address: not used with --controller-only") {
		t.Errorf("--controller-only --peer-address: exit %d, %q", code, out)
	}
}

// --copy-stall-timeout reaches the pool runtime; zero, negative or
// without the peer transport is refused, naming the flag.
func TestCopyStallTimeoutFlag(t *testing.T) {
	base := []string{"--nodeid=n", `--datadir=[{"name":"a","path":"/a"}]`}
	peer := append(append([]string{}, base...), "--peer-address=:9447", "--peer-cert-dir=/peer")
	o, code, out := parse(t, base...)
	if code != 0 || o.driverConfig().CopyStallTimeout != 5*time.Minute {
		t.Fatalf("default: exit %d (%s), %v; want 5m", code, out, o)
	}
	o, code, out = parse(t, append(peer, "--copy-stall-timeout=90s")...)
	if code != 0 || o.driverConfig().CopyStallTimeout != 90*time.Second {
		t.Fatalf("90s: exit %d (%s); want it in the runtime's configuration", code, out)
	}
	for arg, want := range map[string]string{
		"--copy-stall-timeout=0":   "--copy-stall-timeout: 0s must be positive",
		"--copy-stall-timeout=-1m": "--copy-stall-timeout: -1m0s must be positive",
	} {
		if _, code, out := parse(t, append(peer, arg)...); code != 2 || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, %q; want 2 and %q", arg, code, out, want)
		}
	}
	if _, code, out := parse(t, append(base, "--copy-stall-timeout=1m")...); code != 2 || !strings.Contains(out, "--copy-stall-timeout: only used with --peer-address") {
		t.Errorf("without --peer-address: exit %d, %q", code, out)
	}
}
