package render

import (
	"fmt"

	secv1 "github.com/openshift/api/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// SecurityContextConstraints of the KubeVirt operator, under its names, so
// that a takeover updates them in place and anything that refers to them
// (a pod's required-scc, an admin's RBAC) keeps working.
const (
	CSISCCName    = "hostpath-provisioner-csi"
	LegacySCCName = "hostpath-provisioner"
	// RequiredSCCAnnotation makes OpenShift admit a pod under this SCC
	// only, rather than the highest-priority SCC that happens to fit: a
	// pod that no longer fits fails loudly instead of running with less
	// (or more) than it was meant to.
	RequiredSCCAnnotation = "openshift.io/required-scc"
)

// SCCs are the SecurityContextConstraints the node pods run under on
// OpenShift (Config.OpenShift): the CSI driver's (hpp-csi, the mounters
// and their cleanup Jobs, all run as its ServiceAccount) and, for a
// pathConfig CR, the legacy provisioner's. Elsewhere: none.
func (c *Config) SCCs(spec *hppv1.HostPathProvisionerSpec) []client.Object {
	if !c.OpenShift {
		return nil
	}
	objs := []client.Object{c.CSISCC(serviceAccountUser(c.Namespace, CSIServiceAccount))}
	if spec.IsLegacy() {
		objs = append(objs, c.legacySCC())
	}
	return objs
}

// AllSCCs are the SCCs of either kind of CR: what a deletion removes.
func (c *Config) AllSCCs() []client.Object {
	if !c.OpenShift {
		return nil
	}
	return []client.Object{c.CSISCC(serviceAccountUser(c.Namespace, CSIServiceAccount)), c.legacySCC()}
}

func serviceAccountUser(ns, sa string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
}

// CSISCC allows what the CSI driver's pods use and nothing else:
// privileged containers (bind mounts and SELinux relabelling in hpp-csi,
// mount(2) and block devices in hpp-mounter), host directories, the pool
// PVC of a mounter and the projected ServiceAccount token; no host
// network, PID or IPC. With the peer transport (peer.go) also its port on
// the node and the volumes of its certificate (emptyDir) and CA bundle
// (configMap); no host port otherwise. users may be empty: the openshift
// kustomize component grants its use through RBAC instead.
func (c *Config) CSISCC(users ...string) *secv1.SecurityContextConstraints {
	scc := c.baseSCC(CSISCCName, users)
	scc.AllowPrivilegedContainer = true
	scc.AllowPrivilegeEscalation = ptr.To(true) // implied by privileged; refused otherwise
	scc.Volumes = []secv1.FSType{secv1.FSTypeHostPath, secv1.FSTypePersistentVolumeClaim, secv1.FSProjected}
	if c.PeerTransport {
		scc.AllowHostPorts = true
		scc.Volumes = append(scc.Volumes, secv1.FSTypeEmptyDir, secv1.FSTypeConfigMap)
	}
	return scc
}

// legacySCC: hpp-legacy runs as root to make directories on the host but
// is not privileged and never needs to gain privileges.
func (c *Config) legacySCC() *secv1.SecurityContextConstraints {
	scc := c.baseSCC(LegacySCCName, []string{serviceAccountUser(c.Namespace, LegacyServiceAccount)})
	scc.AllowPrivilegeEscalation = ptr.To(false)
	scc.Volumes = []secv1.FSType{secv1.FSTypeHostPath, secv1.FSProjected}
	return scc
}

// baseSCC holds what both SCCs share, as upstream sets it: any user and
// SELinux context (the volumes are host directories that hpp labels
// itself), the capabilities upstream drops, and the RuntimeDefault seccomp
// profile every hpp pod asks for (an SCC without it refuses such pods).
func (c *Config) baseSCC(name string, users []string) *secv1.SecurityContextConstraints {
	if users == nil {
		users = []string{}
	}
	return &secv1.SecurityContextConstraints{
		TypeMeta:   metav1.TypeMeta{APIVersion: secv1.GroupVersion.String(), Kind: "SecurityContextConstraints"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: c.labels(name)},
		// OpenShift ranks a nil priority as 0; set because the CRD
		// requires the field and a manifest leaves nulls out.
		Priority:                 ptr.To[int32](0),
		AllowHostDirVolumePlugin: true,
		DefaultAddCapabilities:   []corev1.Capability{},
		AllowedCapabilities:      []corev1.Capability{},
		RequiredDropCapabilities: []corev1.Capability{"KILL", "MKNOD", "SETUID", "SETGID"},
		RunAsUser:                secv1.RunAsUserStrategyOptions{Type: secv1.RunAsUserStrategyRunAsAny},
		SELinuxContext:           secv1.SELinuxContextStrategyOptions{Type: secv1.SELinuxStrategyRunAsAny},
		FSGroup:                  secv1.FSGroupStrategyOptions{Type: secv1.FSGroupStrategyRunAsAny},
		SupplementalGroups:       secv1.SupplementalGroupsStrategyOptions{Type: secv1.SupplementalGroupsStrategyRunAsAny},
		SeccompProfiles:          []string{"runtime/default"},
		Users:                    users,
		Groups:                   []string{},
	}
}

// podAnnotations are a node pod template's annotations: on OpenShift, the
// SCC it must run under.
func (c *Config) podAnnotations(scc string) map[string]string {
	if !c.OpenShift {
		return nil
	}
	return map[string]string{RequiredSCCAnnotation: scc}
}
