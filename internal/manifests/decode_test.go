package manifests

import (
	"strings"
	"testing"
)

// TestDecodeKeepsIntegersAndSkipsEmptyDocuments: numbers come back as
// int64 (as from the API server), empty documents are left out, and a
// broken document is named by its index.
func TestDecodeKeepsIntegersAndSkipsEmptyDocuments(t *testing.T) {
	objs, err := Decode(strings.NewReader("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {}\n---\n---\n" +
		`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b"}, "spec": {"replicas": 3}}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetName() != "b" {
		t.Fatalf("decoded %d objects: %v; want ConfigMap a and Deployment b", len(objs), objs)
	}
	if n, ok := objs[1].Object["spec"].(map[string]any)["replicas"].(int64); !ok || n != 3 {
		t.Errorf("spec.replicas = %#v; want int64 3", objs[1].Object["spec"].(map[string]any)["replicas"])
	}
	if _, err := Decode(strings.NewReader("kind: A\n---\nkind: [\n")); err == nil || !strings.Contains(err.Error(), "manifest document 1") {
		t.Errorf("broken second document: err = %v; want it named as document 1", err)
	}
}
