package render

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Clean returns the object as it is applied or written to a manifest: no
// status, no zero creationTimestamp.
func Clean(obj client.Object) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// prune drops null values and empty maps: typed objects carry them for
// fields never set, and in a strategic merge patch a null deletes.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = prune(e)
			if m, ok := e.(map[string]any); e == nil || ok && len(m) == 0 {
				delete(t, k)
			} else {
				t[k] = e
			}
		}
	case []any:
		for i := range t {
			t[i] = prune(t[i])
		}
	}
	return v
}

// YAML renders objects as one multi-document manifest, without null
// values and empty maps.
func YAML(header string, objs ...client.Object) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, o := range objs {
		m, err := Clean(o)
		if err != nil {
			return nil, err
		}
		prune(m)
		b, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}
