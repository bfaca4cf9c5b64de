package version

import (
	"strings"
	"testing"
)

func TestInfoStringNamesComponentAndVersion(t *testing.T) {
	got := Get("hpp-csi").String()
	for _, want := range []string{"hpp-csi", Version, Commit, "go1."} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, want it to contain %q", got, want)
		}
	}
}
