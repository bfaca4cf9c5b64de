package kubeapi

import (
	"context"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
)

// The claim's dataSourceRef wins over its dataSource; a missing object is
// IsNotFound, other failures are not.
func TestSourcesClaim(t *testing.T) {
	objects := map[string]string{
		"/api/v1/namespaces/ns/persistentvolumeclaims/both": `{"metadata":{"namespace":"ns","name":"both","uid":"u"},` +
			`"spec":{"dataSource":{"kind":"PersistentVolumeClaim","name":"old"},` +
			`"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"snap","namespace":"other"}}}`,
		"/api/v1/namespaces/ns/persistentvolumeclaims/old": `{"metadata":{"namespace":"ns","name":"old"},` +
			`"spec":{"volumeName":"pv","dataSource":{"kind":"PersistentVolumeClaim","name":"src"}}}`,
	}
	srv := kubeapitest.Server(t, objects, nil) // the claim "apidown" answers 500
	s := NewSourcesForHost(srv.URL, srv.Client())
	ctx := context.Background()
	c, err := s.Claim(ctx, "ns", "both")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Ref{APIGroup: "snapshot.storage.k8s.io", Kind: "VolumeSnapshot", Name: "snap", Namespace: "other"}); c.DataSource == nil || *c.DataSource != want || c.UID != "u" {
		t.Errorf("claim both: %+v, want the dataSourceRef %+v", c, want)
	}
	c, err = s.Claim(ctx, "ns", "old")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Ref{Kind: "PersistentVolumeClaim", Name: "src"}); c.DataSource == nil || *c.DataSource != want || c.VolumeName != "pv" {
		t.Errorf("claim old: %+v, want the dataSource %+v and volume pv", c, want)
	}
	if _, err := s.Claim(ctx, "ns", "missing"); !IsNotFound(err) {
		t.Errorf("missing claim: %v, want IsNotFound", err)
	}
	if _, err := s.Claim(ctx, "ns", "apidown"); err == nil || IsNotFound(err) {
		t.Errorf("failing API: %v, want an error that is not IsNotFound", err)
	}
}
