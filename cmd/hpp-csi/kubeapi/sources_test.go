package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces/ns/persistentvolumeclaims/broken" {
			http.Error(w, "{}", http.StatusInternalServerError)
			return
		}
		body, ok := objects[r.URL.Path]
		if !ok {
			http.Error(w, `{"reason":"NotFound"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
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
	if _, err := s.Claim(ctx, "ns", "broken"); err == nil || IsNotFound(err) {
		t.Errorf("failing API: %v, want an error that is not IsNotFound", err)
	}
}
