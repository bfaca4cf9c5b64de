package kubeapi

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A TLS API server that only answers the token it was given; the kubeconfig
// names its CA by data and the token by file, which is re-read per request.
func TestKubeconfigClientTokenFileAndCA(t *testing.T) {
	var want string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want {
			http.Error(w, `{"reason":"Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"volumeBindingMode":"Immediate"}`))
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "token"), "first\n")
	kc := writeFile(t, filepath.Join(dir, "kubeconfig"), fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: ctx
clusters:
- name: c
  cluster:
    server: %s/
    certificate-authority-data: %s
users:
- name: u
  user:
    tokenFile: token
contexts:
- name: ctx
  context: {cluster: c, user: u}
`, srv.URL, base64.StdEncoding.EncodeToString(caPEM)))
	c, err := Connect(kc)
	if err != nil {
		t.Fatal(err)
	}
	b := NewForHost(c.Host, c.Client)
	for _, token := range []string{"first", "rotated"} {
		want = token
		writeFile(t, filepath.Join(dir, "token"), token)
		var sc storageClass
		if err := b.get(context.Background(), "/apis/storage.k8s.io/v1/storageclasses/x", &sc); err != nil {
			t.Fatalf("token %q: %v", token, err)
		}
	}
}

func TestKubeconfigClientRefusesWhatItCannotDo(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ config, want string }{
		"exec plugin": {`current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]`, `user "u": only client certificates and tokens`},
		"no current context": {`clusters: []`, "current-context: not set"},
		"unknown context":    {`current-context: nope`, `context "nope" not found`},
		"no server": {`current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]`, `cluster "c": not found or has no server`},
		"bad CA": {`current-context: x
clusters: [{name: c, cluster: {server: "https://h", certificate-authority: ca.pem}}]
contexts: [{name: x, context: {cluster: c, user: u}}]`, "certificate authority"},
	} {
		kc := writeFile(t, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")), tc.config)
		_, err := Connect(kc)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--kubeconfig") {
			t.Errorf("%s: %v, want an error naming --kubeconfig and containing %q", name, err, tc.want)
		}
	}
}

func TestInClusterNeedsTheServiceEnvironment(t *testing.T) {
	_, _, err := InClusterClient("", "")
	if err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("got %v, want an error naming KUBERNETES_SERVICE_HOST", err)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
