package serve

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]string{"unix:///run/csi.sock": "/run/csi.sock", "unix:/run/csi.sock": "/run/csi.sock", "/run/x/../csi.sock": "/run/csi.sock"} {
		if got, err := ParseEndpoint(in); err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, part := range map[string]string{"tcp://0.0.0.0:10000": "only unix sockets", "relative.sock": "absolute"} {
		if _, err := ParseEndpoint(in); err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("ParseEndpoint(%q) error = %v, want it to mention %q", in, err, part)
		}
	}
}
