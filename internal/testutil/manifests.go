package testutil

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hostpath-provisioner/hpp/internal/manifests"
)

// ReadManifests decodes the manifests in the file at path (manifests.ReadFile)
// and fails the test when it cannot.
func ReadManifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
