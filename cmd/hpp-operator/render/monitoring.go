package render

import (
	"fmt"
	"maps"
	"strings"

	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Monitoring objects keep the names and labels of the KubeVirt operator's,
// so that a takeover updates them in place and dashboards, alert routes and
// the runbooks keyed on the alert names keep working.
const (
	// PrometheusLabel marks the pods whose metrics the metrics Service
	// exposes, and every monitoring object.
	PrometheusLabel    = "prometheus.hostpathprovisioner.kubevirt.io"
	MetricsServiceName = "hpp-prometheus-metrics"
	PrometheusRuleName = "prometheus-hpp-rules"
	ServiceMonitorName = "service-monitor-hpp"
	// MonitoringRBACName names the Role and RoleBinding that let the
	// cluster's Prometheus discover the metrics endpoints.
	MonitoringRBACName = "hostpath-provisioner-monitoring"
	// OperatorDeploymentName is the operator's Deployment (deploy/base):
	// the recording rule counts its pods.
	OperatorDeploymentName = "hostpath-provisioner-operator"
	// OperatorUpRecord is upstream's recording rule: the number of running
	// operator pods, which HPPOperatorDown fires on.
	OperatorUpRecord = "cluster:kubevirt_hpp_operator_up:sum"

	DefaultMonitoringNamespace = "monitoring"
	DefaultRunbookURLTemplate  = "https://kubevirt.io/monitoring/runbooks/%s"

	// MetricsPort is where the operator and hpp-csi serve /metrics, over
	// TLS, as upstream's operator and driver do: upstream's NetworkPolicy
	// hpp-allow-ingress-to-metrics opens this port and no other.
	MetricsPort     = 8443
	metricsPortName = "metrics"
)

// ValidateRunbookURLTemplate checks RUNBOOK_URL_TEMPLATE: the alert name
// is put in its one %s.
func ValidateRunbookURLTemplate(t string) error {
	if strings.Count(t, "%s") != 1 || strings.Count(t, "%") != 1 {
		return fmt.Errorf("RUNBOOK_URL_TEMPLATE: %q must hold exactly one %%s (the alert name) and no other %%", t)
	}
	return nil
}

func (c *Config) monitoringLabels(app string) map[string]string {
	return withLabel(c.labels(app), PrometheusLabel, "true")
}

// withLabel returns a copy of labels with key=value added.
func withLabel(labels map[string]string, key, value string) map[string]string {
	out := maps.Clone(labels)
	out[key] = value
	return out
}

// MetricsService exposes the metrics port of every pod labelled
// PrometheusLabel (the operator and the node plugins). It is made whether
// or not Prometheus runs: anything can scrape it.
func (c *Config) MetricsService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServiceName, Namespace: c.Namespace, Labels: c.monitoringLabels(MetricsServiceName)},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{PrometheusLabel: "true"},
			Ports: []corev1.ServicePort{{Name: metricsPortName, Port: MetricsPort, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(metricsPortName)}},
		},
	}
}

// PrometheusObjects are made when the cluster runs prometheus-operator
// (Config.PrometheusOperator): read access for its Prometheus, the
// ServiceMonitor and the rules.
func (c *Config) PrometheusObjects() []client.Object {
	labels := c.monitoringLabels(MonitoringRBACName)
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: MonitoringRBACName, Namespace: c.Namespace, Labels: labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"},
			Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: MonitoringRBACName, Namespace: c.Namespace, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: MonitoringRBACName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus-k8s", Namespace: c.monitoringNamespace()}},
	}
	return []client.Object{role, binding, c.serviceMonitor(), c.prometheusRule()}
}

func (c *Config) monitoringNamespace() string {
	if c.MonitoringNamespace == "" {
		return DefaultMonitoringNamespace
	}
	return c.MonitoringNamespace
}

func (c *Config) serviceMonitor() *promv1.ServiceMonitor {
	labels := c.monitoringLabels(ServiceMonitorName)
	labels["openshift.io/cluster-monitoring"] = "" // OpenShift's in-cluster Prometheus picks it up
	return &promv1.ServiceMonitor{
		TypeMeta:   metav1.TypeMeta{APIVersion: promv1.SchemeGroupVersion.String(), Kind: promv1.ServiceMonitorsKind},
		ObjectMeta: metav1.ObjectMeta{Name: ServiceMonitorName, Namespace: c.Namespace, Labels: labels},
		Spec: promv1.ServiceMonitorSpec{
			// No namespaceSelector: the ServiceMonitor's own namespace, so a
			// kustomize namespace change leaves nothing stale.
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{PrometheusLabel: "true"}},
			// TLS with the pods' self-signed certificates (nothing signs
			// them for Prometheus) at the profile's minimum version, as
			// upstream's ServiceMonitor does (its literal scheme "https").
			Endpoints: []promv1.Endpoint{{Port: metricsPortName, Scheme: ptr.To(promv1.Scheme("https")),
				HTTPConfigWithProxyAndTLSFiles: promv1.HTTPConfigWithProxyAndTLSFiles{HTTPConfigWithTLSFiles: promv1.HTTPConfigWithTLSFiles{
					TLSConfig: &promv1.TLSConfig{SafeTLSConfig: promv1.SafeTLSConfig{InsecureSkipVerify: ptr.To(true),
						MinVersion: ptr.To(promv1.TLSVersion(strings.TrimPrefix(c.metricsTLSVersion(), "Version")))}}}}}},
		},
	}
}

// alert is one alerting rule; severity and healthImpact are the labels
// KubeVirt's alert routing uses.
type alert struct {
	name, expr, forDuration, summary, severity, healthImpact string
}

// alerts: upstream's three, unchanged, hpp's pool-full warning on the
// node plugins' own pool metrics, and its stranded-volumes warning.
func alerts() []alert {
	return []alert{
		{"HPPOperatorDown", OperatorUpRecord + " == 0", "5m", "Hostpath Provisioner operator is down.", "warning", "critical"},
		{"HPPNotReady", "kubevirt_hpp_cr_ready == 0", "5m", "Hostpath Provisioner is not available to use.", "warning", "critical"},
		{"HPPSharingPoolPathWithOS", "kubevirt_hpp_pool_path_shared_with_os == 1", "1m",
			"HPP pool path sharing a filesystem with OS, fix to prevent HPP PVs from causing disk pressure and affecting node operation.", "warning", "warning"},
		// Less than a fifth left and, at the last six hours' rate, nothing
		// left within a day: early enough to add a disk, late enough not to
		// fire for a pool that is merely well used.
		{"HPPPoolFullSoon",
			"(hpp_pool_available_bytes / hpp_pool_capacity_bytes < 0.2) and (predict_linear(hpp_pool_available_bytes[6h], 24 * 3600) < 0)", "30m",
			"A storage pool of the Hostpath Provisioner will be full within a day at its current rate; new volumes will not fit.", "warning", "warning"},
		// The node-loss controller's count (controller/nodeloss/report.go):
		// volumes whose node was deleted or is long NotReady; their pods
		// cannot start until the claims are released or the node returns.
		{"HPPVolumesStranded", "sum by (node, reason) (kubevirt_hpp_stranded_volumes) > 0", "5m",
			"Hostpath Provisioner volumes live on a node that is gone or NotReady; their pods cannot start there.", "warning", "warning"},
	}
}

func (c *Config) prometheusRule() *promv1.PrometheusRule {
	template := c.RunbookURLTemplate
	if template == "" {
		template = DefaultRunbookURLTemplate
	}
	// Upstream's groups: both records (the old name kept for dashboards),
	// then the alerts.
	up := intstr.FromString(fmt.Sprintf("sum(up{namespace='%s', pod=~'%s-.*'} or vector(0))", c.Namespace, OperatorDeploymentName))
	records := []promv1.Rule{{Record: OperatorUpRecord, Expr: up}, {Record: "kubevirt_hpp_operator_up", Expr: up}}
	var rules []promv1.Rule
	for _, a := range alerts() {
		rules = append(rules, promv1.Rule{
			Alert: a.name,
			Expr:  intstr.FromString(a.expr),
			For:   ptr.To(promv1.Duration(a.forDuration)),
			Annotations: map[string]string{
				"summary":     a.summary,
				"runbook_url": fmt.Sprintf(template, a.name),
			},
			Labels: map[string]string{
				"severity":                      a.severity,
				"operator_health_impact":        a.healthImpact,
				"kubernetes_operator_part_of":   "kubevirt",
				"kubernetes_operator_component": "hostpath-provisioner-operator",
			},
		})
	}
	return &promv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: promv1.SchemeGroupVersion.String(), Kind: promv1.PrometheusRuleKind},
		ObjectMeta: metav1.ObjectMeta{Name: PrometheusRuleName, Namespace: c.Namespace, Labels: c.monitoringLabels(PrometheusRuleName)},
		Spec: promv1.PrometheusRuleSpec{Groups: []promv1.RuleGroup{
			{Name: "recordingRules.rules", Rules: records}, {Name: "alerts.rules", Rules: rules}}},
	}
}

// MonitoringObjects are the metrics Service, and the Prometheus objects on
// a cluster that runs prometheus-operator.
func (c *Config) MonitoringObjects() []client.Object {
	objs := []client.Object{c.MetricsService()}
	if c.PrometheusOperator {
		objs = append(objs, c.PrometheusObjects()...)
	}
	return objs
}
