package testenv

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// StubCRD stands in for a third-party CRD (cert-manager's,
// prometheus-operator's: the module proxy serves neither's manifests) so
// that objects of its kind can be served and dry-run; their own schema is
// not hpp's to test, so it is left open.
func StubCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}},
			}},
		},
	}
}

// StubClusterCRD is StubCRD for a cluster-scoped kind.
func StubClusterCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	crd := StubCRD(group, kind, plural)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	if strings.HasSuffix(group, ".k8s.io") {
		// The API server wants the approval of a protected group named,
		// as the real CRDs of the group do.
		crd.Annotations = map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter"}
	}
	return crd
}

// PrometheusOperatorCRDs are stand-ins of prometheus-operator's two kinds
// that hpp makes.
func PrometheusOperatorCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		StubCRD("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
		StubCRD("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
	}
}
