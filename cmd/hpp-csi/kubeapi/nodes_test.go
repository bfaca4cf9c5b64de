package kubeapi

import (
	"context"
	"reflect"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
)

// What the fetching side of cross-node clones reads: a Node's addresses, a
// PV's required node affinity, a content's source volume and labels.
func TestSourcesNodeAndPlacement(t *testing.T) {
	objects := map[string]string{
		"/api/v1/nodes/n1": `{"metadata":{"name":"n1"},"status":{"addresses":[{"type":"Hostname","address":"n1"},{"type":"InternalIP","address":"10.0.0.1"}]}}`,
		"/api/v1/persistentvolumes/pv": `{"metadata":{"name":"pv"},"spec":{"csi":{"driver":"d","volumeHandle":"pv"},` +
			`"nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["n1"]}]}]}}}}`,
		"/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/c": `{"metadata":{"name":"c","labels":{"l":"v"}},` +
			`"spec":{"driver":"d","source":{"volumeHandle":"pv"},"volumeSnapshotRef":{"namespace":"ns","name":"s","uid":"u"}},"status":{"snapshotHandle":"h"}}`,
	}
	srv := kubeapitest.Server(t, objects, nil)
	s := NewSourcesForHost(srv.URL, srv.Client())
	ctx := context.Background()
	n, err := s.Node(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []NodeAddress{{"Hostname", "n1"}, {"InternalIP", "10.0.0.1"}}; n.Name != "n1" || !reflect.DeepEqual(n.Addresses, want) {
		t.Errorf("node: %+v", n)
	}
	if _, err := s.Node(ctx, "n2"); !IsNotFound(err) {
		t.Errorf("missing node: %v, want IsNotFound", err)
	}
	pv, err := s.Volume(ctx, "pv")
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]Requirement{{{Key: "k", Operator: "In", Values: []string{"n1"}}}}; !reflect.DeepEqual(pv.NodeTerms, want) {
		t.Errorf("PV node terms: %+v, want %+v", pv.NodeTerms, want)
	}
	c, err := s.SnapshotContent(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.SourceVolumeHandle != "pv" || c.Labels["l"] != "v" || c.Handle != "h" {
		t.Errorf("content: %+v", c)
	}
}
