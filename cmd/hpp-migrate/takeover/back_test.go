package takeover

import (
	"context"
	"io"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestBackRemovesWorkloadsOnlyHPPRuns: after the way back, a Deployment
// hpp's operator made and upstream's never touched (csi-resizer) is
// deleted; the pool mounters and the CSI DaemonSet, which upstream's
// operator has rolled (its field manager is on them), stay, and so does
// what the backup restored. The real node found csi-resizer left running
// under upstream's operator.
func TestBackRemovesWorkloadsOnlyHPPRuns(t *testing.T) {
	hppMade := map[string]string{ManagedByLabel: hppManagedBy}
	resizer := obj("apps/v1", "Deployment", ns, "hostpath-provisioner-csi-resizer", "", hppMade, nil)
	mounter := obj("apps/v1", "Deployment", ns, "hpp-pool-653b815e", UpstreamOperatorManager, hppMade, nil)
	csi := obj("apps/v1", "DaemonSet", ns, CSIDaemonSetName, UpstreamOperatorManager, hppMade, nil)
	restored := obj("apps/v1", "Deployment", ns, OperatorName, "", hppMade, nil)
	r := &Runner{Client: fakeClient(resizer, mounter, csi, restored), Namespace: ns, Out: io.Discard}
	b := &Backup{Objects: []*unstructured.Unstructured{restored.DeepCopy()}}
	if err := r.removeHPPOnly(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		res  Resource
		name string
		want bool
	}{
		{rDeployment, "hostpath-provisioner-csi-resizer", false},
		{rDeployment, "hpp-pool-653b815e", true},
		{rDaemonSet, CSIDaemonSetName, true},
		{rDeployment, OperatorName, true},
	} {
		got, err := r.res(c.res).Get(context.Background(), c.name, metav1.GetOptions{})
		if there := err == nil && got != nil; there != c.want {
			t.Errorf("%s %s there after the way back: %v, want %v (%v)", c.res.Kind, c.name, there, c.want, err)
		}
	}
}

// TestBackKeepsWhatWasUpstreams: an object of upstream's that hpp's
// operator wrote last (its label is hpp's, upstream's operator has not
// written it again yet) stays; upstream's operator, finding its CSI
// ServiceAccount gone, made it again and deleted its CSI DaemonSet with
// it, which stopped the node's plugin and unmounted the pools on the real
// node. An object only hpp ever had still goes.
func TestBackKeepsWhatWasUpstreams(t *testing.T) {
	hppMade := map[string]string{ManagedByLabel: hppManagedBy}
	upstreamsSA := obj("v1", "ServiceAccount", ns, "hostpath-provisioner-admin-csi", HPPOperatorManager, hppMade, nil)
	hppsSA := obj("v1", "ServiceAccount", ns, "hostpath-provisioner-csi-resizer", HPPOperatorManager, hppMade, nil)
	r := &Runner{Client: fakeClient(upstreamsSA, hppsSA), Namespace: ns, Out: io.Discard}
	b := &Backup{Upstream: []Ref{refOf(upstreamsSA)}}
	if err := r.removeHPPOnly(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"hostpath-provisioner-admin-csi": true, "hostpath-provisioner-csi-resizer": false} {
		got, err := r.get(rSA, name)
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != want {
			t.Errorf("ServiceAccount %s there after the way back: %v, want %v", name, got != nil, want)
		}
	}
}
