package render

import (
	"strings"
	"testing"
)

// Upstream's shortening: names that fit are kept; longer ones become
// <cut base>-<fnv32a(base)>-<suffix>, or, when even the suffix does not
// fit, <cut base>-<fnv32a(base-suffix)> cut to the limit.
func TestNamesHashedAsUpstream(t *testing.T) {
	pool50 := strings.Repeat("p", 50)
	node := "worker-0.example.com"
	long := strings.Repeat("n", 80)
	cases := []struct{ got, want string }{
		{MounterName("fast", "node-a"), "hpp-pool-fast-node-a"},
		{CleanupJobName("fast", "node-a"), "cleanup-pool-fast-node-a"},
		{PoolClaimName("fast", ""), "hpp-pool-fast-shared"},
		{PoolLabelValue("fast"), "fast-hpp"},
		// base "hpp-pool-"+pool50 (59) + suffix (20) > 63: keep 63-10-20 = 33.
		{MounterName(pool50, node), ("hpp-pool-" + pool50)[:33] + "-" + fnv32("hpp-pool-"+pool50) + "-" + node},
		// suffix longer than the limit: the hash covers base and suffix.
		{MounterName("fast", long), "hpp-pool-fast-" + fnv32("hpp-pool-fast-"+long)},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
		if len(c.got) > MaxNameLength {
			t.Errorf("case %d: %q is %d characters", i, c.got, len(c.got))
		}
	}
	if MounterName("fast", long) == MounterName("fast", long+"x") {
		t.Error("two long node names map to one mounter name")
	}
	// Reference value computed outside Go (offset 0x811c9dc5, prime 0x01000193).
	if got := fnv32("hpp"); got != "f498b70f" {
		t.Errorf("fnv32a(hpp) = %s: not FNV-1a 32", got)
	}
}
