package render

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
)

// Names upstream's operator gave (issue 21, from its formula and observed
// on a real install), asserted as literals: hpp's own code must not be
// the reference for itself.
func TestNamesAreUpstreams(t *testing.T) {
	const awsNode = "ip-10-0-142-17.us-east-2.compute.internal"
	const forty = "a-pool-name-of-exactly-forty-characters"
	cases := []struct{ what, got, want string }{
		{"claim local/long node", PoolClaimName("local", "worker-0.ocp4-cluster-with-a-long-name.example.com"), "hpp-pool-bfb30906"},
		{"mounter local/long node", MounterName("local", "worker-0.ocp4-cluster-with-a-long-name.example.com"), "hpp-pool-bfb30906"},
		{"cleanup local/long node", CleanupJobName("local", "worker-0.ocp4-cluster-with-a-long-name.example.com"), "cleanup-pool-73a467aa"},
		{"claim fast-nvme-pool/aws", PoolClaimName("fast-nvme-pool", awsNode), "hpp-pool-14ab030c"},
		{"mounter fast-nvme-pool/aws", MounterName("fast-nvme-pool", awsNode), "hpp-pool-14ab030c"},
		{"cleanup fast-nvme-pool/aws", CleanupJobName("fast-nvme-pool", awsNode), "cleanup-pool-57519208"},
		{"claim forty/node01 (fits)", PoolClaimName(forty, "node01"), "hpp-pool-a-pool-name-of-exactly-forty-characters-node01"},
		{"claim forty/aws", PoolClaimName(forty, awsNode), "hpp-pool-dd22f383"},
		{"shared claim of 50 p", PoolClaimName(strings.Repeat("p", 50), ""), "hpp-pool-a1e61337"},
		{"mounter fifty/hpp-node", MounterName("a-pool-name-of-exactly-fifty-characters-0123456789", "hpp-node"), "hpp-pool-653b815e"},
		{"short", MounterName("fast", "node-a"), "hpp-pool-fast-node-a"},
		{"short cleanup", CleanupJobName("fast", "node-a"), "cleanup-pool-fast-node-a"},
		{"short shared", PoolClaimName("fast", ""), "hpp-pool-fast-shared"},
		{"pool label", PoolLabelValue("fast"), "fast-hpp"},
		{"volume", poolVolume("local"), "local-data-dir"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %q, want upstream's %q", c.what, c.got, c.want)
		}
	}
}

// refName is upstream's getResourceNameWithMaxLength written again from
// the statement of it, independently of names.go.
func refName(base, suffix string) string {
	full := fmt.Sprintf("%s-%s", base, suffix)
	if len(full) <= 63 {
		return full
	}
	h := func(s string) string {
		f := fnv.New32a()
		f.Write([]byte(s))
		return fmt.Sprintf("%08x", f.Sum32())
	}
	if n := 63 - 10 - len(suffix); n >= 0 {
		return base[:n] + "-" + h(base) + "-" + suffix
	}
	out := base + "-" + h(full)
	if len(out) > 63 {
		out = out[:63]
	}
	return out
}

// Every pool and node name length from 1 to 63 gives the reference's name,
// never longer than 63, and distinct names for distinct inputs.
func TestNamesMatchUpstreamFormulaForEveryLength(t *testing.T) {
	seen := map[string]string{}
	for pl := 1; pl <= 63; pl++ {
		for nl := 1; nl <= 63; nl++ {
			pool := strings.Repeat("p", pl)
			node := strings.Repeat("n", nl)
			checks := []struct{ got, want string }{
				{MounterName(pool, node), refName("hpp-pool", pool+"-"+node)},
				{PoolClaimName(pool, node), refName("hpp-pool", pool+"-"+node)},
				{CleanupJobName(pool, node), refName("cleanup-pool", pool+"-"+node)},
				{PoolClaimName(pool, ""), refName("hpp-pool", pool+"-shared")},
				{PoolLabelValue(pool), refName(pool, "hpp")},
			}
			for _, c := range checks {
				if c.got != c.want || len(c.got) > MaxNameLength {
					t.Fatalf("pool %d, node %d characters: got %q (%d), want %q", pl, nl, c.got, len(c.got), c.want)
				}
			}
			key := pool + "/" + node
			if other, dup := seen[checks[0].got]; dup {
				t.Fatalf("%s and %s both map to %s", other, key, checks[0].got)
			}
			seen[checks[0].got] = key
		}
	}
	// Reference value computed outside Go (offset 0x811c9dc5, prime 0x01000193).
	if got := fnv32("hpp"); got != "f498b70f" {
		t.Errorf("fnv32a(hpp) = %s: not FNV-1a 32", got)
	}
}
