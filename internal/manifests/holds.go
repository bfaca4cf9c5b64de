package manifests

import "fmt"

// Holds reports whether live (an object as the API server returns it, in
// its unstructured form) holds every field of want with want's value, so
// that applying want again would change nothing: maps key by key (live
// may hold more: the API server's defaults, other managers' fields),
// lists item by item and of the same length (a list hpp sets is its own
// as a whole), scalars as printed, so that JSON's and YAML's numbers
// compare equal. A null, or an empty map or list, in want holds where live
// has nothing: the API server drops them. hpp-operator's applier and
// hpp-migrate's takeover both skip a write on it.
func Holds(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live == nil && len(w) == 0
		}
		for k, wv := range w {
			if !Holds(l[k], wv) { // l[k] is nil where live lacks k
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return live == nil && len(w) == 0
		}
		if len(l) != len(w) {
			return false
		}
		for i := range w {
			if !Holds(l[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	}
	return live != nil && fmt.Sprint(live) == fmt.Sprint(want)
}
