package migrate

import (
	"net"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// The control-plane tests need a global IPv4 address for the kubernetes
// Service's endpoint; without one they skip, and fail under CI=true, where
// every control-plane test skipping would leave the tier green on nothing.
func TestAdvertiseIPFromFailsUnderCIWithoutGlobalIPv4(t *testing.T) {
	loopback := &net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)}
	linkLocal := &net.IPNet{IP: net.IPv4(169, 254, 1, 1), Mask: net.CIDRMask(16, 32)}
	v6 := &net.IPNet{IP: net.ParseIP("2001:db8::1"), Mask: net.CIDRMask(64, 128)}
	global := &net.IPNet{IP: net.IPv4(10, 0, 2, 15), Mask: net.CIDRMask(24, 32)}
	for _, c := range []struct {
		name  string
		ci    string
		addrs []net.Addr
		want  string
		how   string
	}{
		{"global after loopback", "true", []net.Addr{loopback, v6, global}, "10.0.2.15", ""},
		{"none, by hand", "", []net.Addr{loopback, linkLocal, v6}, "", "skip"},
		{"none, CI=true", "true", []net.Addr{loopback, linkLocal, v6}, "", "fail"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			r := &testutil.EndRecorder{TB: t}
			if got := advertiseIPFrom(r, c.addrs); got != c.want || r.How != c.how {
				t.Errorf("advertiseIPFrom = %q and the test %s (%s), want %q and %q", got, orElse(r.How, "went on"), r.Msg, c.want, orElse(c.how, "went on"))
			}
		})
	}
}

func orElse(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
