package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
	cfg, err := renderConfig(o, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Images.CSI != "r/hpp-csi:1" || cfg.Images.Legacy != "r/hpp-legacy:1" || cfg.Images.Provisioner != "r/csi-provisioner:6" ||
		cfg.Images.Mounter != "r/hpp-mounter:1" || cfg.Images.Resizer != "r/csi-resizer:2" || cfg.Verbosity != 5 || cfg.KubeletDir != "/var/lib/k0s/kubelet" || cfg.Namespace != "hpp" {
		t.Errorf("config %+v", cfg)
	}
	env["VERBOSITY"] = "loud"
	env["NODE_DRIVER_REG_IMAGE"] = "r/registrar"
	_, err = renderConfig(o, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), `VERBOSITY: "loud" is not a non-negative integer`) {
		t.Errorf("bad VERBOSITY: %v", err)
	}
	env["VERBOSITY"] = "1"
	_, err = renderConfig(o, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "NODE_DRIVER_REG_IMAGE and LIVENESS_PROBE_IMAGE: set both") {
		t.Errorf("one sidecar image: %v", err)
	}
}

// Upstream's monitoring variables: the Prometheus namespace and the runbook
// URL template (exactly one %s, the alert name).
func TestMonitoringEnvironment(t *testing.T) {
	env := map[string]string{"MONITORING_NAMESPACE": "openshift-monitoring", "RUNBOOK_URL_TEMPLATE": "https://r.example/%s"}
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	cfg, err := renderConfig(o, func(k string) string { return env[k] })
	if err != nil || cfg.MonitoringNamespace != "openshift-monitoring" || cfg.RunbookURLTemplate != "https://r.example/%s" {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	for _, bad := range []string{"https://r.example/", "https://r.example/%s/%s", "https://r.example/%d"} {
		env["RUNBOOK_URL_TEMPLATE"] = bad
		_, err := renderConfig(o, func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), "RUNBOOK_URL_TEMPLATE: "+fmt.Sprintf("%q", bad)+" must hold exactly one %s") {
			t.Errorf("RUNBOOK_URL_TEMPLATE=%s: %v", bad, err)
		}
	}
}

func TestOptionsValidateNamesEveryBadFlag(t *testing.T) {
	o := &options{webhookPort: 70000, controllers: "nodes", nodeLossDelay: time.Second}
	o.logging.Level, o.logging.Format = "loud", "json"
	err := o.validate()
	for _, want := range []string{`--log-level: "loud"`, "--webhook-port: 70000 is not a TCP port", "--namespace: required",
		`--controllers: "nodes" is not "all" or "node-loss"`, "--node-loss-release-delay: 1s is shorter than 10s", "--node-not-ready-grace: 0s must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// Unknown cipher names stop the operator before it does anything, with
// every bad name in the message.
func TestUnknownCipherStopsStart(t *testing.T) {
	env := map[string]string{"TLS_CIPHERS_OVERRIDE": "ECDHE-RSA-AES128-GCM-SHA256,BOGUS-CIPHER,TLS_FAKE_SUITE"}
	o := &options{namespace: "hpp", kubeletDir: "/var/lib/kubelet"}
	err := run(t.Context(), o, func(k string) string { return env[k] })
	want := "TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) BOGUS-CIPHER, TLS_FAKE_SUITE"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start with unknown ciphers: %v; want an error with %q", err, want)
	}
}
