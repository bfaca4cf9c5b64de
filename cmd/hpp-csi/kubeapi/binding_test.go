package kubeapi

import (
	"context"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
)

// A fake API server answering the two GETs the check makes.
func TestImmediateClass(t *testing.T) {
	objects := map[string]string{
		"/api/v1/namespaces/ns/persistentvolumeclaims/a": `{"spec":{"storageClassName":"wffc"}}`,
		"/api/v1/namespaces/ns/persistentvolumeclaims/b": `{"spec":{"storageClassName":"now"}}`,
		"/api/v1/namespaces/ns/persistentvolumeclaims/c": `{"spec":{"storageClassName":"unset"}}`,
		"/api/v1/namespaces/ns/persistentvolumeclaims/d": `{"spec":{}}`,
		"/apis/storage.k8s.io/v1/storageclasses/wffc":    `{"volumeBindingMode":"WaitForFirstConsumer"}`,
		"/apis/storage.k8s.io/v1/storageclasses/now":     `{"volumeBindingMode":"Immediate"}`,
		"/apis/storage.k8s.io/v1/storageclasses/unset":   `{}`,
	}
	srv := kubeapitest.Server(t, objects, nil)
	b := NewForHost(srv.URL, srv.Client())
	for name, want := range map[string]bool{"a": false, "b": true, "c": true, "d": false} {
		_, immediate, err := b.ImmediateClass(context.Background(), "ns", name)
		if err != nil || immediate != want {
			t.Errorf("claim %s: immediate %v, %v; want %v", name, immediate, err, want)
		}
	}
	_, _, err := b.ImmediateClass(context.Background(), "ns", "missing")
	if err == nil || !strings.Contains(err.Error(), "claim ns/missing") || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing claim: %v, want an error naming the claim and the status", err)
	}
}
