package manifests

import "testing"

func TestHolds(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "a", "uid": "123"},
		"spec":     map[string]any{"replicas": int64(3), "args": []any{"--v=3", "--x"}},
	}
	for _, c := range []struct {
		name string
		want any
		held bool
	}{
		{"a subset", map[string]any{"metadata": map[string]any{"name": "a"}}, true},
		{"YAML's number as JSON's", map[string]any{"spec": map[string]any{"replicas": float64(3)}}, true},
		{"another value", map[string]any{"spec": map[string]any{"replicas": int64(2)}}, false},
		{"a missing field", map[string]any{"spec": map[string]any{"paused": true}}, false},
		{"an empty map, a null and an empty list where live has nothing",
			map[string]any{"status": map[string]any{}, "paused": nil, "extra": []any{}}, true},
		{"the same list", map[string]any{"spec": map[string]any{"args": []any{"--v=3", "--x"}}}, true},
		{"a shorter list", map[string]any{"spec": map[string]any{"args": []any{"--v=3"}}}, false},
		{"a list where live has a map", map[string]any{"metadata": []any{"a"}}, false},
	} {
		if got := Holds(live, c.want); got != c.held {
			t.Errorf("%s: Holds = %v, want %v", c.name, got, c.held)
		}
	}
}
