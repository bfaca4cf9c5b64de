package kubeapi

import (
	"context"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
)

// What the sweep of uncollected copies reads: a claim's UID, whether a PV
// exists. Only the API server's 404 says "gone"; a failure, or a claim
// answered without a UID, is an error (the sweep then keeps the volume).
func TestClaimUIDAndPersistentVolumeExists(t *testing.T) {
	objects := map[string]string{
		"/api/v1/namespaces/ns/persistentvolumeclaims/here":   `{"metadata":{"namespace":"ns","name":"here","uid":"u-1"}}`,
		"/api/v1/namespaces/ns/persistentvolumeclaims/no-uid": `{"metadata":{"namespace":"ns","name":"no-uid"}}`,
		"/api/v1/persistentvolumes/pvc-u-1":                   `{"metadata":{"name":"pvc-u-1"}}`,
	}
	srv := kubeapitest.Server(t, objects, nil) // the claim and the PV "apidown" answer 500
	s := NewSourcesForHost(srv.URL, srv.Client())
	ctx := context.Background()
	for _, tt := range []struct {
		claim   string
		uid     string
		found   bool
		wantErr bool
	}{
		{"here", "u-1", true, false},
		{"gone", "", false, false},
		{"apidown", "", false, true},
		{"no-uid", "", false, true},
	} {
		uid, found, err := s.ClaimUID(ctx, "ns", tt.claim)
		if uid != tt.uid || found != tt.found || (err != nil) != tt.wantErr {
			t.Errorf("claim %s: %q, found %v, %v; want %q, %v, error %v", tt.claim, uid, found, err, tt.uid, tt.found, tt.wantErr)
		}
	}
	for _, tt := range []struct {
		pv      string
		exists  bool
		wantErr bool
	}{
		{"pvc-u-1", true, false},
		{"pvc-gone", false, false},
		{"apidown", false, true},
	} {
		exists, err := s.PersistentVolumeExists(ctx, tt.pv)
		if exists != tt.exists || (err != nil) != tt.wantErr {
			t.Errorf("PV %s: %v, %v; want %v, error %v", tt.pv, exists, err, tt.exists, tt.wantErr)
		}
	}
}
