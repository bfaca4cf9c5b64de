package takeover

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clienttesting "k8s.io/client-go/testing"
)

// TestBackupSavesUpstreamsNodeWorkloads: the switch's backup holds
// upstream's CSI DaemonSet and pool mounter as its operator wrote them,
// and neither upstream's operator Deployment (an install object) nor
// anything of hpp's.
func TestBackupSavesUpstreamsNodeWorkloads(t *testing.T) {
	objs := append(upstreamInstall(), obj("apps/v1", "Deployment", ns, "hostpath-provisioner-csi-resizer", "", map[string]string{ManagedByLabel: hppManagedBy}, nil))
	inv, err := Collect(context.Background(), fakeClient(objs...), ns, hppManifests())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range workloadCandidates(inv) {
		got = append(got, refOf(w).String())
	}
	slices.Sort(got)
	want := []string{"DaemonSet " + ns + "/" + CSIDaemonSetName, "Deployment " + ns + "/hpp-pool-653b815e"}
	if !slices.Equal(got, want) {
		t.Errorf("node workloads saved: %v, want %v", got, want)
	}
}

// TestBackPutsWorkloadsBackBeforeUpstreamsOperatorStarts: the way back
// writes upstream's CSI DaemonSet over hpp's, keeping the live selector,
// and waits for its pods before it creates upstream's operator: that
// operator, reconciling while it rolled hpp's pods itself, deleted every
// pool mounter and unmounted the pools with cleanup Jobs on the real node.
func TestBackPutsWorkloadsBackBeforeUpstreamsOperatorStarts(t *testing.T) {
	rolledStatus := map[string]any{"observedGeneration": int64(0), "desiredNumberScheduled": int64(1),
		"currentNumberScheduled": int64(1), "updatedNumberScheduled": int64(1), "numberAvailable": int64(1)}
	image := func(img string) map[string]any {
		return map[string]any{"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"k8s-app": "hostpath-provisioner"}},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "plugin", "image": img}}}},
		}, "status": rolledStatus}
	}
	hppDS := obj("apps/v1", "DaemonSet", ns, CSIDaemonSetName, HPPOperatorManager, map[string]string{ManagedByLabel: hppManagedBy}, image("hpp-csi:1"))
	upDS := cleaned(obj("apps/v1", "DaemonSet", ns, CSIDaemonSetName, UpstreamOperatorManager, upLabels, image("hostpath-csi-driver:latest")))
	unstructured.RemoveNestedField(upDS.Object, "spec", "selector") // the live one must stay
	operator := cleaned(obj("apps/v1", "Deployment", ns, OperatorName, KubectlCreateManager, nil, selector("name", OperatorName)))
	client := fakeClient(hppDS)
	r := &Runner{Client: client, Namespace: ns, Out: io.Discard, Timeout: 50 * time.Millisecond, Interval: 10 * time.Millisecond}
	b := &Backup{Objects: []*unstructured.Unstructured{operator}, Workloads: []*unstructured.Unstructured{upDS}}
	backupSecret(t, r, b)

	// upstream's operator never becomes Available here: Back stops
	// waiting for it, after the steps this test is about.
	err := r.Back(context.Background())
	if err == nil {
		t.Fatal("Back succeeded without upstream's operator running")
	}
	t.Logf("Back stopped: %v", err)
	ds, err := r.get(rDaemonSet, CSIDaemonSetName)
	if err != nil || ds == nil {
		t.Fatalf("DaemonSet after the way back: %v %v", ds, err)
	}
	if imgs := images(ds); !slices.Equal(imgs, []string{"hostpath-csi-driver:latest"}) {
		t.Errorf("DaemonSet images %v, want upstream's", imgs)
	}
	if sel, _, _ := unstructured.NestedString(ds.Object, "spec", "selector", "matchLabels", "k8s-app"); sel != "hostpath-provisioner" {
		t.Errorf("DaemonSet selector k8s-app=%q, want the live hostpath-provisioner", sel)
	}
	if ds.GetLabels()[ManagedByLabel] != upstreamManagedBy {
		t.Errorf("DaemonSet labels %v, want upstream's", ds.GetLabels())
	}
	putBack, operatorMade := -1, -1
	for i, a := range client.Actions() {
		switch res := a.GetResource().Resource; {
		case a.GetVerb() == "update" && res == "daemonsets":
			putBack = i
		case a.GetVerb() == "create" && res == "deployments":
			if o, ok := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured); ok && o.GetName() == OperatorName {
				operatorMade = i
			}
		}
	}
	if putBack < 0 || operatorMade < 0 || putBack > operatorMade {
		t.Errorf("DaemonSet put back at action %d, upstream's operator created at action %d: want the DaemonSet first", putBack, operatorMade)
	}
}

// backupSecret writes b as the switch would.
func backupSecret(t *testing.T, r *Runner, b *Backup) {
	t.Helper()
	inv := &Inventory{Live: map[string][]*unstructured.Unstructured{}}
	for _, o := range b.Objects {
		c := o.DeepCopy()
		c.SetLabels(map[string]string{ManagedByLabel: upstreamManagedBy})
		inv.Live[o.GetKind()] = append(inv.Live[o.GetKind()], c)
	}
	for _, w := range b.Workloads {
		c := w.DeepCopy()
		inv.Live[w.GetKind()] = append(inv.Live[w.GetKind()], c)
	}
	if err := r.backup(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadBackup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Workloads) != len(b.Workloads) {
		t.Fatalf("backup read back holds %d workloads, want %d", len(got.Workloads), len(b.Workloads))
	}
}
