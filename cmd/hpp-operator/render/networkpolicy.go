package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Upstream's NetworkPolicies: in a namespace that denies ingress by default
// (as KubeVirt installs under HCO do), they let Prometheus reach the
// metrics port and the API server reach the webhook. hpp keeps their names
// and specs, so a takeover finds them unchanged (same values: no field
// conflict with the manager that created them) and an install of hpp
// alone is reachable the same way.
const (
	MetricsNetworkPolicyName = "hpp-allow-ingress-to-metrics"
	WebhookNetworkPolicyName = "hpp-allow-ingress-to-operator-webhook-server"
	// OperatorPodLabel is upstream's operator pod label (its Deployment's
	// selector), which the webhook NetworkPolicy selects; hpp's operator
	// pods carry it too.
	OperatorPodLabel = "name"
	// WebhookPort is the operator's webhook port (the Service's target).
	WebhookPort = 9443
	// AllowClusterServicesLabel lets a pod reach the API server and cluster
	// DNS under KubeVirt's default-deny egress policies; upstream puts it on
	// its operator pod.
	AllowClusterServicesLabel = "np.kubevirt.io/allow-access-cluster-services"
)

// NetworkPolicies are upstream's two ingress policies for the install
// namespace. They are part of the install manifests (deploy/), not of what
// the operator reconciles: the webhook must be reachable before the first
// CR exists.
func (c *Config) NetworkPolicies() []client.Object {
	return []client.Object{
		c.ingressPolicy(MetricsNetworkPolicyName, map[string]string{PrometheusLabel: "true"}, MetricsPort),
		c.ingressPolicy(WebhookNetworkPolicyName, map[string]string{OperatorPodLabel: OperatorDeploymentName}, WebhookPort),
	}
}

// MetricsNetworkPolicy is the metrics policy alone (installs without the
// operator: deploy/components/monitoring).
func (c *Config) MetricsNetworkPolicy() client.Object { return c.NetworkPolicies()[0] }

func (c *Config) ingressPolicy(name string, pods map[string]string, port int32) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.labels(name)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{
				Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))}}}},
		},
	}
}
