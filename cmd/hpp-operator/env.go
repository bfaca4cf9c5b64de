package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
)

// environment is what the operator takes from its environment: upstream's
// variables (docs/design.md, the compatibility contract: operator env) and a few of hpp's own, read here
// and nowhere else.
type environment struct {
	// Images of what the operator deploys.
	csiImage, legacyImage, provisionerImage, registrarImage, livenessImage, snapshotImage, resizerImage string
	// mounterImage (MOUNTER_IMAGE) and operatorImage (OPERATOR_IMAGE):
	// upstream runs its pool mounters from OPERATOR_IMAGE; hpp's mounter is
	// its own image, so MOUNTER_IMAGE wins and OPERATOR_IMAGE is the
	// mounter only when MOUNTER_IMAGE is unset (see mounter()).
	mounterImage, operatorImage string
	// healthMonitorImage (CSI_HEALTH_MONITOR_IMAGE) is accepted and unused:
	// hpp-csi reports volume health itself (CSI 1.13 health RPCs).
	healthMonitorImage string
	verbosity          string
	// operatorNamespace (OPERATOR_NAMESPACE, hpp's) and watchNamespace
	// (WATCH_NAMESPACE, upstream's: its own namespace, from the downward
	// API) both name the namespace the operator installs into.
	operatorNamespace, watchNamespace       string
	installerPartOf, installerVersion       string
	monitoringNamespace, runbookURLTemplate string
	tlsMinVersion, tlsCiphers               string
}

// envVar is one variable the operator honours: where it goes, what it
// defaults to and what it means. The table below is the one list: it is
// read by readEnvironment and printed into README.md by make generate
// (TestREADMEEnvironment).
type envVar struct {
	name    string
	field   func(*environment) *string
	dflt    string
	meaning string
}

// envVars are the operator's variables, in README.md's order.
func envVars() []envVar {
	d := render.DefaultConfig()
	return []envVar{
		{"CSI_PROVISIONER_IMAGE", func(e *environment) *string { return &e.csiImage }, d.Images.CSI,
			"image of hpp-csi, the CSI driver (upstream's name: its driver's image)"},
		{"PROVISIONER_IMAGE", func(e *environment) *string { return &e.legacyImage }, d.Images.Legacy,
			"image of hpp-legacy, the legacy provisioner (CRs with `pathConfig`)"},
		{"CSI_SIG_STORAGE_PROVISIONER_IMAGE", func(e *environment) *string { return &e.provisionerImage }, d.Images.Provisioner,
			"csi-provisioner sidecar"},
		{"NODE_DRIVER_REG_IMAGE", func(e *environment) *string { return &e.registrarImage }, "",
			"node-driver-registrar sidecar; with `LIVENESS_PROBE_IMAGE` (both or neither; neither: hpp-csi registers itself and serves `/healthz`)"},
		{"LIVENESS_PROBE_IMAGE", func(e *environment) *string { return &e.livenessImage }, "",
			"livenessprobe sidecar; with `NODE_DRIVER_REG_IMAGE`"},
		{"CSI_SNAPSHOT_IMAGE", func(e *environment) *string { return &e.snapshotImage }, d.Images.Snapshotter,
			"csi-snapshotter sidecar, for pools with a `snapshotProvider`"},
		{"CSI_RESIZER_IMAGE", func(e *environment) *string { return &e.resizerImage }, d.Images.Resizer,
			"csi-resizer (hpp's own variable): the expansion Deployment"},
		{"MOUNTER_IMAGE", func(e *environment) *string { return &e.mounterImage }, d.Images.Mounter,
			"image of hpp-mounter, the pool mounters of `pvcTemplate` pools"},
		{"OPERATOR_IMAGE", func(e *environment) *string { return &e.operatorImage }, "",
			"the pool mounters' image when `MOUNTER_IMAGE` is unset, as upstream runs its mounter from its operator image (it must then carry hpp-mounter)"},
		{"CSI_HEALTH_MONITOR_IMAGE", func(e *environment) *string { return &e.healthMonitorImage }, "",
			"accepted and unused: hpp-csi reports volume health itself"},
		{"VERBOSITY", func(e *environment) *string { return &e.verbosity }, strconv.Itoa(d.Verbosity),
			"the components' `--v`: a non-negative integer"},
		{"OPERATOR_NAMESPACE", func(e *environment) *string { return &e.operatorNamespace }, "",
			"`--namespace` when the flag is not given (hpp's variable)"},
		{"WATCH_NAMESPACE", func(e *environment) *string { return &e.watchNamespace }, "",
			"`--namespace` when neither the flag nor `OPERATOR_NAMESPACE` is given (upstream's: its own namespace); must agree with `OPERATOR_NAMESPACE` when both are set"},
		{"INSTALLER_PART_OF_LABEL", func(e *environment) *string { return &e.installerPartOf }, "",
			"the `app.kubernetes.io/part-of` label of every object (unset: `" + render.PartOf + "`)"},
		{"INSTALLER_VERSION_LABEL", func(e *environment) *string { return &e.installerVersion }, "",
			"the `app.kubernetes.io/version` label of every object (unset: none)"},
		{"MONITORING_NAMESPACE", func(e *environment) *string { return &e.monitoringNamespace }, render.DefaultMonitoringNamespace,
			"where the cluster's Prometheus runs: its `prometheus-k8s` ServiceAccount may discover the metrics endpoints"},
		{"RUNBOOK_URL_TEMPLATE", func(e *environment) *string { return &e.runbookURLTemplate }, render.DefaultRunbookURLTemplate,
			"each alert's `runbook_url`, the alert name in its one `%s`"},
		{"TLS_MIN_VERSION_OVERRIDE", func(e *environment) *string { return &e.tlsMinVersion }, "",
			"minimum TLS version of the webhook and `/metrics` over the cluster's TLS profile: `VersionTLS12` or `VersionTLS13`"},
		{"TLS_CIPHERS_OVERRIDE", func(e *environment) *string { return &e.tlsCiphers }, "",
			"TLS 1.2 cipher suites of the webhook and `/metrics` over the cluster's TLS profile, comma-separated (Go/IANA or OpenSSL names)"},
	}
}

// readEnvironment takes every variable the operator honours.
func readEnvironment(getenv func(string) string) environment {
	var e environment
	for _, v := range envVars() {
		*v.field(&e) = getenv(v.name)
	}
	return e
}

// envMarkdown is README.md's table of the variables.
func envMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range envVars() {
		dflt := ""
		if v.dflt != "" {
			dflt = "`" + v.dflt + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.name, dflt, strings.ReplaceAll(v.meaning, "|", `\|`))
	}
	return b.String()
}

// mounter is the pool mounters' image: MOUNTER_IMAGE, else OPERATOR_IMAGE
// (upstream's rule: its mounter binary ships in the operator image), else
// empty (render's default). The second is right only for an operator image
// that carries the mounter; hpp's manifests set MOUNTER_IMAGE.
func (e environment) mounter() (image string, fromOperatorImage bool) {
	if e.mounterImage != "" {
		return e.mounterImage, false
	}
	return e.operatorImage, e.operatorImage != ""
}
