package render

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// The peer transport of cross-node clones (cmd/hpp-csi/peer): each node's
// hpp-csi serves the sources it holds to the other nodes' hpp-csi, over
// mutual TLS with a certificate the operator's signer
// (controller/peercerts) issues for that node alone.
const (
	// PeerPort is where every node's hpp-csi listens for its peers. One
	// port for all: a peer is found at its Node's InternalIP and the port
	// of the asking node's own --peer-address (cmd/hpp-csi/remote), so
	// the port is published on the node (hostPort) and must be the same
	// everywhere. 9447: free beside the operator's webhook (9443) and the
	// test harness's own (test/cluster PeerPort), so a cluster tier and an
	// install agree.
	PeerPort = 9447
	// PeerCASecretName holds the peer CA (operator's namespace).
	PeerCASecretName = contract.PeerCASecret
	// PeerCABundleName is the ConfigMap (operator's namespace) with the
	// CA bundle every hpp-csi trusts, under PeerCABundleKey.
	PeerCABundleName = contract.PeerCABundle
	PeerCABundleKey  = "ca.crt"
	// PeerNetworkPolicyName lets the node plugins reach each other's
	// peer port.
	PeerNetworkPolicyName = "hpp-allow-ingress-to-peer"

	peerPortName  = "peer"
	peerCertDir   = "/peer-cert"
	peerBundleDir = "/peer-ca-bundle"
)

// peerClusterRules are what hpp-csi's peer transport calls
// (cmd/hpp-csi/kubeapi) beyond csiClusterRules, which already hold the
// claims and PVs it reads (get), and snapshotRules the VolumeSnapshots and
// contents of a restore (get; without the Snapshotting gate there are
// none to restore from).
var peerClusterRules = []rbacv1.PolicyRule{
	// The source node's InternalIP (remote.Resolver).
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
	// Its own certificate (peercert.Keeper): create the request, read the
	// answer by name. No list or watch: it polls its own request.
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}},
}

// PeerCALabels are the labels of the peer CA Secret and bundle ConfigMap.
func (c *Config) PeerCALabels() map[string]string { return c.labels(PeerCABundleName) }

// PeerServiceAccountUser is the user hpp-csi's certificate requests come
// from: the CSI node plugin's service account.
func (c *Config) PeerServiceAccountUser() string {
	return serviceAccountUser(c.Namespace, CSIServiceAccount)
}

// withPeer adds the peer transport to hpp-csi's container and the pod's
// volumes: the listener, published on the node; the certificate directory
// the keeper fills (an emptyDir in memory: the private key never reaches
// the node's disk, and it survives a container restart, not the pod); the
// bundle ConfigMap, optional so that the pods start before the operator
// has published it (hpp-csi then serves its own node and refuses peers
// with the reason, and retries until the file appears: kubelet fills an
// optional ConfigMap volume once the ConfigMap exists).
func (c *Config) withPeer(driver *corev1.Container, volumes []corev1.Volume) []corev1.Volume {
	if !c.PeerTransport {
		return volumes
	}
	driver.Args = append(driver.Args,
		"--peer-address=:"+strconv.Itoa(PeerPort),
		"--peer-cert-dir="+peerCertDir,
		"--peer-ca-bundle="+path.Join(peerBundleDir, PeerCABundleKey))
	driver.Ports = append(driver.Ports, corev1.ContainerPort{
		Name: peerPortName, ContainerPort: PeerPort, HostPort: PeerPort, Protocol: corev1.ProtocolTCP})
	driver.VolumeMounts = append(driver.VolumeMounts,
		corev1.VolumeMount{Name: "peer-cert", MountPath: peerCertDir},
		corev1.VolumeMount{Name: "peer-ca-bundle", MountPath: peerBundleDir, ReadOnly: true})
	return append(volumes,
		corev1.Volume{Name: "peer-cert", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
		corev1.Volume{Name: "peer-ca-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: PeerCABundleName}, Optional: ptr.To(true)}}})
}

// PeerNetworkPolicy opens the peer port of the node plugins to the node
// plugins alone. Ingress only: a policy with Egress in its types isolates
// the pods it selects for all egress, which would cut csi-provisioner and
// hpp-csi off the API server wherever egress is not denied by default;
// and a peer dials a Node's address (the hostPort), which no pod selector
// matches. Like upstream's policies it is part of the operator's install
// (deploy/base/operator), not reconciled. Its source selector holds where
// the peer's connection keeps its pod address on the way to the node's
// hostPort; a CNI that masquerades pod-to-node traffic (Calico with
// natOutgoing, flannel) shows the peer node's address instead, which this
// policy refuses (see deploy/README.md).
func (c *Config) PeerNetworkPolicy() *networkingv1.NetworkPolicy {
	plugins := metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: CSIDaemonSetName}}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PeerNetworkPolicyName, Namespace: c.Namespace, Labels: c.labels(PeerNetworkPolicyName)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: plugins,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &plugins}},
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(PeerPort))}},
			}},
		},
	}
}
