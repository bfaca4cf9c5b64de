package kit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

// IPTables runs iptables on this machine's filter table (waiting for the
// xtables lock: kube-proxy takes it) with a time bound; the error carries
// its stderr. The tiers that cut traffic (e2e's peer cut, chaos's node cut)
// match only their own traffic, since the harness shares the machine's
// network namespace.
func IPTables(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return testutil.Run(ctx, "iptables", append([]string{"-w", "10"}, args...)...)
}

// DroppedPackets sums the packet counters of the OUTPUT rules whose
// listing contains marker (a comment or a cgroup path of the caller's own
// rules), so that a cut can show it cut something.
func DroppedPackets(ctx context.Context, marker string) (int64, error) {
	out, err := IPTables(ctx, "-L", "OUTPUT", "-v", "-n", "-x")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(l, marker) {
			v, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("iptables counters %q: %w", l, err)
			}
			n += v
		}
	}
	return n, nil
}
