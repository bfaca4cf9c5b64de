package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version, fixed by the compatibility
// contract (docs/design.md, the compatibility contract).
var GroupVersion = schema.GroupVersion{Group: "hostpathprovisioner.kubevirt.io", Version: "v1beta1"}

// AddToScheme registers the API's types with a scheme. It is a plain
// function rather than a package-level SchemeBuilder so importing the package
// has no side effects.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &HostPathProvisioner{}, &HostPathProvisionerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
