// Package takeover switches a namespace running the KubeVirt
// hostpath-provisioner-operator to hpp-operator and back: Assess reads the
// cluster and says what happens to each of upstream's objects and whether
// to go; Switch performs it; Back returns the cluster to upstream's
// operator from the backup Switch made.
package takeover

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Field managers. Upstream installs with `kubectl create` and its operator
// writes with Create/Update and no field owner (the API server names the
// manager after the binary); hpp's install is a server-side apply, done
// here under kubectl's own manager name so that a later
// `kubectl apply --server-side -k` by the user conflicts with nothing.
const (
	UpstreamOperatorManager = "hostpath-provisioner-operator"
	KubectlCreateManager    = "kubectl-create"
	ApplyManager            = "kubectl"
	// HPPOperatorManager is hpp-operator's field manager.
	HPPOperatorManager = "hpp-operator"
)

// upstreamUpdateManagers are the Update-operation managers of upstream's
// install whose fields the switch hands over to ApplyManager (the client-
// to server-side apply migration kubectl documents).
var upstreamUpdateManagers = []string{KubectlCreateManager, "kubectl-client-side-apply", "kubectl-replace", "kubectl-edit"}

// Labels and names upstream's install uses.
const (
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	upstreamManagedBy = "hostpath-provisioner-operator"
	hppManagedBy      = "hpp-operator"
	OperatorName      = "hostpath-provisioner-operator"
	CRDName           = "hostpathprovisioners.hostpathprovisioner.kubevirt.io"
	WebhookConfigName = "hostpathprovisioner.kubevirt.io"
	// Upstream's webhook.yaml: Service, the Secret cert-manager writes,
	// and cert-manager's Issuer and Certificate.
	upstreamWebhookService = "hostpath-provisioner-operator-webhook-service"
	upstreamWebhookSecret  = "hostpath-provisioner-operator-webhook-service-cert"
	upstreamIssuer         = "selfsigned-issuer"
	// HPPFinalizer is hpp-operator's finalizer on the CR; upstream's
	// operator adds its own when it takes the CR back.
	HPPFinalizer = "hostpathprovisioner.kubevirt.io/cleanup"
	// BackupSecret holds upstream's install objects as they were before
	// the switch, for Back.
	BackupSecret = "hpp-takeover-backup"
)

// Resource is a kind the takeover reads or writes.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Optional kinds (cert-manager, prometheus-operator) may not be
	// served; their absence is not an error.
	Optional bool
}

var (
	rNamespace   = Resource{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "Namespace", false, false}
	rService     = Resource{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service", true, false}
	rSecret      = Resource{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "Secret", true, false}
	rConfigMap   = Resource{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", true, false}
	rSA          = Resource{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "ServiceAccount", true, false}
	rPVC         = Resource{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, "PersistentVolumeClaim", true, false}
	rPod         = Resource{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", true, false}
	rPV          = Resource{schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}, "PersistentVolume", false, false}
	rDeployment  = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", true, false}
	rDaemonSet   = Resource{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, "DaemonSet", true, false}
	rJob         = Resource{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job", true, false}
	rRole        = Resource{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, "Role", true, false}
	rRoleBinding = Resource{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, "RoleBinding", true, false}
	rClusterRole = Resource{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, "ClusterRole", false, false}
	rCRB         = Resource{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, "ClusterRoleBinding", false, false}
	rCSIDriver   = Resource{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"}, "CSIDriver", false, false}
	rSC          = Resource{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "StorageClass", false, false}
	rVWC         = Resource{schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, "ValidatingWebhookConfiguration", false, false}
	rCRD         = Resource{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, "CustomResourceDefinition", false, false}
	rNetPol      = Resource{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, "NetworkPolicy", true, false}
	rCR          = Resource{schema.GroupVersionResource{Group: "hostpathprovisioner.kubevirt.io", Version: "v1beta1", Resource: "hostpathprovisioners"}, "HostPathProvisioner", false, true}
	rIssuer      = Resource{schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}, "Issuer", true, true}
	rCertificate = Resource{schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}, "Certificate", true, true}
	rSvcMonitor  = Resource{schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}, "ServiceMonitor", true, true}
	rPromRule    = Resource{schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}, "PrometheusRule", true, true}
	rSCC         = Resource{schema.GroupVersionResource{Group: "security.openshift.io", Version: "v1", Resource: "securitycontextconstraints"}, "SecurityContextConstraints", false, true}
)

// Resources are the kinds read from the cluster, in the order the plan
// lists them.
var Resources = []Resource{
	rCRD, rCR, rDeployment, rDaemonSet, rJob, rService, rSecret, rSA, rRole, rRoleBinding,
	rClusterRole, rCRB, rCSIDriver, rVWC, rNetPol, rPVC, rSC, rPV, rIssuer, rCertificate,
	rSvcMonitor, rPromRule, rSCC,
}

// manifestResources are the kinds a manifest of hpp's may hold.
var manifestResources = []Resource{
	rNamespace, rCRD, rSA, rClusterRole, rCRB, rRole, rRoleBinding, rSecret, rConfigMap, rService,
	rDeployment, rVWC, rNetPol, rSvcMonitor, rPromRule, rIssuer, rCertificate,
}

// ResourceOf is the resource of a kind and apiVersion.
func ResourceOf(apiVersion, kind string) (Resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return Resource{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	all := append(slices.Clone(manifestResources), Resources...)
	for _, r := range all {
		if r.Kind == kind && r.GVR.GroupVersion() == gv {
			return r, nil
		}
	}
	return Resource{}, fmt.Errorf("kind %s %s: not one the takeover knows (it applies hpp's operator manifests: %s)", apiVersion, kind, kindList(manifestResources))
}

func kindList(rs []Resource) string {
	var k []string
	for _, r := range rs {
		k = append(k, r.Kind)
	}
	return strings.Join(k, ", ")
}

// Ref names an object.
type Ref struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func refOf(o *unstructured.Unstructured) Ref {
	return Ref{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// managers are the field managers of o's non-status fields.
func managers(o *unstructured.Unstructured) []string {
	var out []string
	for _, m := range o.GetManagedFields() {
		if m.Subresource == "" && !slices.Contains(out, m.Manager) {
			out = append(out, m.Manager)
		}
	}
	return out
}

func hasManager(o *unstructured.Unstructured, names ...string) bool {
	return slices.ContainsFunc(managers(o), func(m string) bool { return slices.Contains(names, m) })
}

// madeByUpstreamOperator: labelled or written by upstream's operator.
func madeByUpstreamOperator(o *unstructured.Unstructured) bool {
	return o.GetLabels()[ManagedByLabel] == upstreamManagedBy || hasManager(o, UpstreamOperatorManager)
}

// madeByHPP: labelled or applied by hpp's operator or hpp's install.
func madeByHPP(o *unstructured.Unstructured) bool {
	return o.GetLabels()[ManagedByLabel] == hppManagedBy || hasManager(o, HPPOperatorManager, ApplyManager)
}

// upstreamInstallNames are the objects of upstream's deploy/operator.yaml
// and webhook.yaml (kubectl create), by kind.
var upstreamInstallNames = map[string][]string{
	"ServiceAccount":                 {OperatorName},
	"ClusterRole":                    {OperatorName},
	"ClusterRoleBinding":             {OperatorName},
	"Role":                           {OperatorName},
	"RoleBinding":                    {OperatorName},
	"CustomResourceDefinition":       {CRDName},
	"Deployment":                     {OperatorName},
	"ValidatingWebhookConfiguration": {WebhookConfigName},
	"Service":                        {upstreamWebhookService},
	"Secret":                         {upstreamWebhookSecret},
	"Issuer":                         {upstreamIssuer},
	"Certificate":                    {upstreamWebhookSecret},
}

func isUpstreamInstallName(kind, name string) bool {
	return slices.Contains(upstreamInstallNames[kind], name)
}

// isNodeWorkload: a DaemonSet or a pool mounter Deployment.
func isNodeWorkload(o *unstructured.Unstructured) bool {
	return o.GetKind() == "DaemonSet" || o.GetKind() == "Deployment" && strings.HasPrefix(o.GetName(), mounterPrefix)
}

// mounterPrefix begins every pool mounter Deployment's name, upstream's
// and hpp's.
const mounterPrefix = "hpp-pool-"
