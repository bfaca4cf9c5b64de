package provisioner

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func TestDecide(t *testing.T) {
	wffc := class("wffc", storagev1.VolumeBindingWaitForFirstConsumer)
	immediate := class("immediate", storagev1.VolumeBindingImmediate)
	noMode := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nomode"}, Provisioner: contract.LegacyProvisionerName}
	other := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "example.com/other"}
	both := map[string]string{contract.AnnProvisionOnNode: testNode, contract.AnnSelectedNode: "node-b"}
	deleting := claim("c", "wffc", selected(testNode))
	deleting.DeletionTimestamp = &metav1.Time{}
	bound := claim("c", "wffc", selected(testNode))
	bound.Spec.VolumeName = "pv-1"
	group := "populator.example.com"
	populated := claim("c", "wffc", selected(testNode))
	populated.Spec.DataSourceRef = &v1.TypedObjectReference{APIGroup: &group, Kind: "ImportSource", Name: "src"}
	cloned := claim("c", "wffc", selected(testNode))
	cloned.Spec.DataSourceRef = &v1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}

	tests := []struct {
		name  string
		claim *v1.PersistentVolumeClaim
		class *storagev1.StorageClass
		want  verdict
		why   string
	}{
		{"wffc selected here", claim("c", "wffc", selected(testNode)), wffc, provision, "the scheduler selected this node"},
		{"wffc selected elsewhere", claim("c", "wffc", selected("node-b")), wffc, skip, `the scheduler selected node "node-b"`},
		{"wffc not selected yet", claim("c", "wffc", nil), wffc, skip, "waiting for the scheduler to select a node"},
		{"wffc provisionOnNode here, no selected node", claim("c", "wffc", onNode(testNode)), wffc, adopt, contract.AnnProvisionOnNode + " names this node and the class waits for a consumer"},
		{"wffc provisionOnNode here wins over selected node", claim("c", "wffc", both), wffc, provision, contract.AnnProvisionOnNode + " names this node"},
		{"wffc provisionOnNode elsewhere", claim("c", "wffc", map[string]string{contract.AnnProvisionOnNode: "node-b", contract.AnnSelectedNode: testNode}), wffc, skip, contract.AnnProvisionOnNode + ` names node "node-b"`},
		{"immediate provisionOnNode here", claim("c", "immediate", onNode(testNode)), immediate, provision, contract.AnnProvisionOnNode + " names this node"},
		{"immediate provisionOnNode elsewhere", claim("c", "immediate", onNode("node-b")), immediate, skip, contract.AnnProvisionOnNode + ` names node "node-b"`},
		{"immediate without annotation", claim("c", "immediate", nil), immediate, unplaceable, "Immediate binding and no " + contract.AnnProvisionOnNode},
		{"immediate with empty annotation", claim("c", "immediate", onNode("")), immediate, unplaceable, "Immediate binding and no " + contract.AnnProvisionOnNode},
		{"immediate ignores a selected node", claim("c", "immediate", selected(testNode)), immediate, unplaceable, "Immediate binding and no " + contract.AnnProvisionOnNode},
		{"class without binding mode is immediate", claim("c", "nomode", nil), noMode, unplaceable, "Immediate binding and no " + contract.AnnProvisionOnNode},
		{"other provisioner", claim("c", "other", onNode(testNode)), other, skip, "claim's StorageClass is not served by " + contract.LegacyProvisionerName},
		{"missing class", claim("c", "gone", onNode(testNode)), nil, skip, "claim's StorageClass is not served by " + contract.LegacyProvisionerName},
		{"bound", bound, wffc, skip, "claim is already bound"},
		{"deleting", deleting, wffc, skip, "claim is being deleted"},
		{"populator", populated, wffc, skip, "claim is filled by a volume populator, which provisions its own claim"},
		{"clone goes on to be refused in Provision", cloned, wffc, provision, "the scheduler selected this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := decide(tt.claim, tt.class, testNode)
			if got != tt.want || why != tt.why {
				t.Errorf("decide = %v, %q; want %v, %q", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestShouldProvisionUnplaceableClaimGetsOneEventFromAllNodes(t *testing.T) {
	e := newEnv(t)
	c := claim("vm-disk", "immediate", nil)
	other := e.newProvisioner("node-b")
	mine := e.newProvisioner(testNode)
	for _, p := range []*Provisioner{mine, other, mine, other} {
		if p.ShouldProvision(context.Background(), c) {
			t.Fatalf("node %s would provision an Immediate claim without %s", p.node, contract.AnnProvisionOnNode)
		}
	}
	want := []string{`PersistentVolumeClaim/vm-disk Warning NoNodeForClaim: no node will provision this claim: StorageClass "immediate" binds immediately and the claim has no ` + contract.AnnProvisionOnNode + ` annotation, so ` + contract.LegacyProvisionerName + ` cannot tell which node's disk to use; add the annotation ` + contract.AnnProvisionOnNode + `: <node name> to the claim, or use a StorageClass with volumeBindingMode: WaitForFirstConsumer`}
	if got := e.events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	ev, err := e.client.CoreV1().Events("ns1").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := ev.Items[0].InvolvedObject
	if ref.Kind != "PersistentVolumeClaim" || ref.Namespace != "ns1" || ref.UID != "uid-vm-disk" || ev.Items[0].Source.Component != contract.LegacyProvisionerName {
		t.Errorf("event refers to %+v from %+v", ref, ev.Items[0].Source)
	}
	if e.entries() != nil {
		t.Errorf("PV_DIR has %q, want nothing", e.entries())
	}
}

func TestShouldProvisionIsSilentForOtherClaims(t *testing.T) {
	e := newEnv(t)
	e.classes["other"] = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "example.com/x"}
	for _, c := range []*v1.PersistentVolumeClaim{
		claim("a", "other", nil),               // another provisioner's Immediate claim
		claim("b", "wffc", selected("node-b")), // another node's
		claim("c", "wffc", nil),                // waiting for a consumer
		claim("d", "missing", nil),             // unknown class
	} {
		if e.p.ShouldProvision(context.Background(), c) {
			t.Errorf("ShouldProvision(%s) = true", c.Name)
		}
	}
	if got := e.events(); got != nil {
		t.Errorf("events = %q, want none", got)
	}
	if len(e.client.Actions()) != 1 || e.client.Actions()[0].GetVerb() != "list" {
		// newEnv's List of events is the only call.
		t.Errorf("API calls: %v", e.client.Actions())
	}
}

func TestShouldProvisionPinsWFFCClaimWithProvisionOnNode(t *testing.T) {
	e := newEnv(t)
	c := claim("pinned", "wffc", onNode(testNode))
	if _, err := e.client.CoreV1().PersistentVolumeClaims("ns1").Create(context.Background(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cached := c.DeepCopy()
	if e.p.ShouldProvision(context.Background(), cached) {
		t.Fatal("ShouldProvision = true before the selected node is set; the library would not provision it")
	}
	if !reflect.DeepEqual(cached, c) {
		t.Errorf("the cached claim was modified:\n got %+v\nwant %+v", cached, c)
	}
	got, err := e.client.CoreV1().PersistentVolumeClaims("ns1").Get(context.Background(), "pinned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{contract.AnnProvisionOnNode: testNode, contract.AnnSelectedNode: testNode}
	if !reflect.DeepEqual(got.Annotations, want) {
		t.Errorf("claim annotations = %v, want %v", got.Annotations, want)
	}
	// The updated claim comes back through the informer and is provisioned.
	if !e.p.ShouldProvision(context.Background(), got) {
		t.Error("ShouldProvision = false once the selected node is this node")
	}
	// Another node leaves it alone.
	b := e.newProvisioner("node-b")
	if b.ShouldProvision(context.Background(), claim("pinned2", "wffc", onNode(testNode))) {
		t.Error("node-b would provision a claim pinned to node-a")
	}
}
