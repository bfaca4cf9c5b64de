package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func TestRenderConfigFromEnvironment(t *testing.T) {
	env := map[string]string{
		"CSI_PROVISIONER_IMAGE":             "r/hpp-csi:1",
		"PROVISIONER_IMAGE":                 "r/hpp-legacy:1",
		"CSI_SIG_STORAGE_PROVISIONER_IMAGE": "r/csi-provisioner:6",
		"MOUNTER_IMAGE":                     "r/hpp-mounter:1",
		"CSI_RESIZER_IMAGE":                 "r/csi-resizer:2",
		"VERBOSITY":                         "5",
	}
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/k0s/kubelet"}
	cfg, err := configFrom(o, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Images.CSI != "r/hpp-csi:1" || cfg.Images.Legacy != "r/hpp-legacy:1" || cfg.Images.Provisioner != "r/csi-provisioner:6" ||
		cfg.Images.Mounter != "r/hpp-mounter:1" || cfg.Images.Resizer != "r/csi-resizer:2" || cfg.Verbosity != 5 || cfg.KubeletDir != "/var/lib/k0s/kubelet" || cfg.Namespace != "hpp" {
		t.Errorf("config %+v", cfg)
	}
	env["VERBOSITY"] = "loud"
	env["NODE_DRIVER_REG_IMAGE"] = "r/registrar"
	_, err = configFrom(o, env)
	if err == nil || !strings.Contains(err.Error(), `VERBOSITY: "loud" is not a non-negative integer`) {
		t.Errorf("bad VERBOSITY: %v", err)
	}
	env["VERBOSITY"] = "1"
	_, err = configFrom(o, env)
	if err == nil || !strings.Contains(err.Error(), "NODE_DRIVER_REG_IMAGE and LIVENESS_PROBE_IMAGE: set both") {
		t.Errorf("one sidecar image: %v", err)
	}
}

// Upstream's monitoring variables: the Prometheus namespace and the runbook
// URL template (exactly one %s, the alert name).
func TestMonitoringEnvironment(t *testing.T) {
	env := map[string]string{"MONITORING_NAMESPACE": "openshift-monitoring", "RUNBOOK_URL_TEMPLATE": "https://r.example/%s"}
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	cfg, err := configFrom(o, env)
	if err != nil || cfg.MonitoringNamespace != "openshift-monitoring" || cfg.RunbookURLTemplate != "https://r.example/%s" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	for _, bad := range []string{"https://r.example/", "https://r.example/%s/%s", "https://r.example/%d"} {
		env["RUNBOOK_URL_TEMPLATE"] = bad
		_, err := configFrom(o, env)
		if err == nil || !strings.Contains(err.Error(), "RUNBOOK_URL_TEMPLATE: "+fmt.Sprintf("%q", bad)+" must hold exactly one %s") {
			t.Errorf("RUNBOOK_URL_TEMPLATE=%s: %v", bad, err)
		}
	}
}

func TestOptionsValidateNamesEveryBadFlag(t *testing.T) {
	o := &options{webhookPort: 70000, controllers: "nodes", nodeLossDelay: time.Second, kubeletDir: "var/lib/kubelet",
		metricsCertDir: "/certs"}
	o.logging.Level, o.logging.Format = "loud", "json"
	err := o.Validate()
	for _, want := range []string{`--log-level: "loud"`, "--webhook-port: 70000 is not a TCP port", "--namespace: required",
		`--kubelet-dir: "var/lib/kubelet" must be a clean absolute path`,
		`--controllers: "nodes" is not "all" or "node-loss"`, "--node-loss-release-delay: 1s is shorter than 10s", "--node-not-ready-grace: 0s must be positive",
		"--metrics-cert-dir: only with --metrics-secure"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// The command reports every bad flag and every bad variable at once, each
// by its name, and exits 2 before it does anything.
func TestCommandNamesEveryBadFlagAndVariable(t *testing.T) {
	env := map[string]string{
		"OPERATOR_NAMESPACE":       "hpp",
		"WATCH_NAMESPACE":          "openshift-cnv",
		"VERBOSITY":                "-1",
		"NODE_DRIVER_REG_IMAGE":    "r/registrar",
		"INSTALLER_VERSION_LABEL":  "4.14 beta",
		"RUNBOOK_URL_TEMPLATE":     "https://r.example/",
		"TLS_MIN_VERSION_OVERRIDE": "VersionTLS11",
		"TLS_CIPHERS_OVERRIDE":     "BOGUS",
	}
	o := &options{}
	ran := false
	cmd := newCommand(o, func(context.Context) error { ran = true; return nil }, func(k string) string { return env[k] })
	var stderr bytes.Buffer
	code := cli.Main(cmd, []string{"--webhook-port=0", "--kubelet-dir=/var/lib/kubelet/", "--controllers=some"}, &stderr)
	if code != 2 || ran {
		t.Fatalf("exit %d (ran: %v), want 2 without running; stderr:\n%s", code, ran, stderr.String())
	}
	for _, want := range []string{
		"--webhook-port: 0 is not a TCP port",
		`--kubelet-dir: "/var/lib/kubelet/" must be a clean absolute path`,
		`--controllers: "some" is not "all" or "node-loss"`,
		`OPERATOR_NAMESPACE "hpp" and WATCH_NAMESPACE "openshift-cnv" name different namespaces`,
		`VERBOSITY: "-1" is not a non-negative integer`,
		"NODE_DRIVER_REG_IMAGE and LIVENESS_PROBE_IMAGE: set both",
		`INSTALLER_VERSION_LABEL: "4.14 beta" is not a label value`,
		`RUNBOOK_URL_TEMPLATE: "https://r.example/" must hold exactly one %s`,
		`TLS_MIN_VERSION_OVERRIDE: "VersionTLS11" is not one of VersionTLS12, VersionTLS13`,
		"TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) BOGUS",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A good command line and environment reach Run with the namespace from
// the environment and the objects' configuration filled.
func TestCommandRunsWithValidatedOptions(t *testing.T) {
	env := map[string]string{"WATCH_NAMESPACE": "openshift-cnv", "VERBOSITY": "4"}
	o := &options{}
	ran := false
	cmd := newCommand(o, func(context.Context) error { ran = true; return nil }, func(k string) string { return env[k] })
	var stderr bytes.Buffer
	if code := cli.Main(cmd, nil, &stderr); code != 0 || !ran {
		t.Fatalf("exit %d (ran: %v); stderr:\n%s", code, ran, stderr.String())
	}
	if o.namespace != "openshift-cnv" || o.render.Namespace != "openshift-cnv" || o.render.Verbosity != 4 || o.tlsPolicy == nil {
		t.Errorf("options after Validate: namespace %q, render %+v, TLS policy %v", o.namespace, o.render, o.tlsPolicy)
	}
}

// Unknown cipher names stop the operator before it does anything, with
// every bad name in the message.
func TestUnknownCipherStopsStart(t *testing.T) {
	env := map[string]string{"TLS_CIPHERS_OVERRIDE": "ECDHE-RSA-AES128-GCM-SHA256,BOGUS-CIPHER,TLS_FAKE_SUITE"}
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	o.env = readEnvironment(func(k string) string { return env[k] })
	err := o.Validate()
	want := "TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) BOGUS-CIPHER, TLS_FAKE_SUITE"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start with unknown ciphers: %v; want an error with %q", err, want)
	}
}

func configFrom(o *options, env map[string]string) (render.Config, error) {
	o.env = readEnvironment(func(k string) string { return env[k] })
	return renderConfig(o)
}

// Upstream runs its pool mounters from OPERATOR_IMAGE; hpp's MOUNTER_IMAGE
// wins over it, and OPERATOR_IMAGE alone is the mounter, as upstream's.
func TestMounterImagePrecedence(t *testing.T) {
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OPERATOR_IMAGE": "r/op:1", "MOUNTER_IMAGE": "r/hpp-mounter:1"}, "r/hpp-mounter:1"},
		{map[string]string{"OPERATOR_IMAGE": "r/op:1"}, "r/op:1"},
		{map[string]string{}, render.DefaultConfig().Images.Mounter},
	} {
		cfg, err := configFrom(o, c.env)
		if err != nil || cfg.Images.Mounter != c.want {
			t.Errorf("env %v: mounter image %q, %v; want %q", c.env, cfg.Images.Mounter, err, c.want)
		}
	}
}

// INSTALLER_PART_OF_LABEL and INSTALLER_VERSION_LABEL become the part-of
// and version labels (upstream's Deployment fills them from its own
// labels); a value that is no label value stops the start, naming it.
func TestInstallerLabels(t *testing.T) {
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	env := map[string]string{"INSTALLER_PART_OF_LABEL": "hyperconverged-cluster", "INSTALLER_VERSION_LABEL": "4.14.0"}
	cfg, err := configFrom(o, env)
	if err != nil || cfg.InstallerPartOf != "hyperconverged-cluster" || cfg.InstallerVersion != "4.14.0" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	ds, err := cfg.CSIDaemonSet(&hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: "/var/hpp"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"app.kubernetes.io/part-of":                  "hyperconverged-cluster",
		"app.kubernetes.io/version":                  "4.14.0",
		"app.kubernetes.io/component":                "storage",
		"prometheus.hostpathprovisioner.kubevirt.io": "true",
	}
	for k, v := range want {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("CSI pod label %s=%q; want %q (labels %v)", k, ds.Spec.Template.Labels[k], v, ds.Spec.Template.Labels)
		}
	}
	env["INSTALLER_VERSION_LABEL"] = "4.14.0 beta"
	_, err = configFrom(o, env)
	if want := `INSTALLER_VERSION_LABEL: "4.14.0 beta" is not a label value`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad version label: %v; want %q", err, want)
	}
}

// Upstream's Deployment sets WATCH_NAMESPACE to its own namespace; hpp
// runs there when neither --namespace nor OPERATOR_NAMESPACE says
// otherwise, and refuses two variables that disagree.
func TestWatchNamespace(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		flag    string
		want    string
		wantErr string
	}{
		{env: map[string]string{"WATCH_NAMESPACE": "openshift-cnv"}, want: "openshift-cnv"},
		{env: map[string]string{"OPERATOR_NAMESPACE": "hpp", "WATCH_NAMESPACE": "hpp"}, want: "hpp"},
		{env: map[string]string{"WATCH_NAMESPACE": "openshift-cnv"}, flag: "other", want: "other"},
		{env: map[string]string{"OPERATOR_NAMESPACE": "hpp", "WATCH_NAMESPACE": "openshift-cnv"},
			wantErr: `OPERATOR_NAMESPACE "hpp" and WATCH_NAMESPACE "openshift-cnv" name different namespaces`},
	} {
		o := &options{namespace: c.flag, env: readEnvironment(func(k string) string { return c.env[k] })}
		err := o.completeNamespace(c.flag != "")
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("env %v: %v; want %q", c.env, err, c.wantErr)
			}
		case err != nil || o.namespace != c.want:
			t.Errorf("env %v flag %q: namespace %q, %v; want %q", c.env, c.flag, o.namespace, err, c.want)
		}
	}
}
