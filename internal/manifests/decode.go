// Package manifests decodes Kubernetes manifests (multi-document YAML or
// JSON, as kubectl kustomize prints them) into unstructured objects: the
// one reader of that format, for hpp-migrate's takeover and for the tests
// that read deploy/. Holds compares a manifest with the live object, for
// the takeover and hpp-operator's applier.
package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Decode returns the objects of a multi-document YAML (or JSON) stream, in
// order, leaving out empty documents (a "---" with nothing after it).
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		// Raw JSON decoded by Unstructured: numbers become int64 as in
		// objects read from the API server (a map[string]any would hold
		// float64, which unstructured.NestedInt64 does not read).
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("manifest document %d: %w", i, err)
		}
		switch string(bytes.TrimSpace(raw)) {
		case "", "null", "{}":
			continue
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", i, err)
		}
		out = append(out, o)
	}
}

// ReadFile decodes the manifests in the file at path; errors name it.
func ReadFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read only: a failed close loses nothing
	objs, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
