package contract

import (
	"strconv"
	"strings"
	"testing"
)

// nearMisses returns the names in text that are one or two edits from a
// contract value of 16 characters or more without being one. A name is a
// run of name characters, dots and slashes, or any run of its
// slash-separated segments (the driver's name inside a socket path).
func nearMisses(text string, values map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, token := range strings.FieldsFunc(text, func(r rune) bool {
		return r > 0x7f || !nameChar(byte(r)) && r != '.' && r != '/'
	}) {
		segs := strings.Split(token, "/")
		for i := range segs {
			for j := i + 1; j <= len(segs); j++ {
				cand := strings.Join(segs[i:j], "/")
				if _, ok := values[cand]; ok || seen[cand] {
					continue
				}
				best, bestD := "", 3
				for v := range values {
					if len(v) < 16 || abs(len(cand)-len(v)) > 2 {
						continue
					}
					if d := distance(cand, v); d < bestD || d == bestD && v < best {
						best, bestD = v, d
					}
				}
				if bestD <= 2 {
					seen[cand] = true
					out = append(out, strconv.Quote(cand)+" is "+itoa(bestD)+" edit(s) from contract."+values[best]+" "+strconv.Quote(best)+": misspelt?")
				}
			}
		}
	}
	return out
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestNearMisses(t *testing.T) {
	g := guarded()
	text := "provisioner: kubevirt.io.hostpath-provisoner\n" +
		"- --kubelet-registration-path=/var/lib/kubelet/plugins/kubevirt.io.hostpath-provisioner/csi.sock\n" +
		"  hostpath.csi/layouts: legacy\n  storagePools: []\n  " + LegacyProvisionerName + ": x\n"
	got := nearMisses(text, g)
	if len(got) != 2 || !strings.Contains(got[0], `"kubevirt.io.hostpath-provisoner"`) || !strings.Contains(got[1], `"hostpath.csi/layouts"`) {
		t.Errorf("nearMisses = %q; want the misspelt driver name and layout key only", got)
	}
}
