package nodeloss

import (
	"fmt"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// TestDecideTable walks the whole table: node gone / NotReady / back ×
// opted in or not × in use or not × delay passed or not, plus the claim
// already gone (the orphaned PV) with either reclaim policy.
func TestDecideTable(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	const grace, delay = 5 * time.Minute, 10 * time.Minute
	type want struct {
		stranded, release, removePV bool
		action                      string
		recheck                     time.Duration
	}
	nothing := want{}
	for _, node := range []nodeState{nodeGone, nodeNotReady, nodeUp} {
		for _, opted := range []bool{false, true} {
			for _, inUse := range []bool{false, true} {
				for _, passed := range []bool{false, true} {
					// "passed" moves the loss back past both the grace
					// period and the delay; "not passed" is 1 minute ago.
					since := now.Add(-time.Minute)
					if passed {
						since = now.Add(-delay - time.Minute)
					}
					f := volumeFacts{node: node, since: since, inUse: inUse}
					if opted {
						f.optIn = optIn{enabled: true, delay: delay}
					}
					var w want
					switch {
					case node == nodeUp:
						w = nothing
					case node == nodeNotReady && !passed:
						w = want{recheck: grace - time.Minute}
					case node == nodeNotReady:
						// Reported, never released: the node exists.
						w = want{stranded: true, action: actionKept}
					case !opted:
						w = want{stranded: true, action: actionKept}
					case !passed:
						w = want{stranded: true, action: actionWaiting, recheck: delay - time.Minute}
					case inUse:
						w = want{stranded: true, action: actionInUse, recheck: inUseRecheck}
					default:
						w = want{stranded: true, action: actionReleasing, release: true}
					}
					name := fmt.Sprintf("node %s, opted in %v, in use %v, delay passed %v", node, opted, inUse, passed)
					t.Run(name, func(t *testing.T) {
						d := decide(f, now, grace)
						got := want{stranded: d.stranded, release: d.release, removePV: d.removePV, action: d.action, recheck: d.recheck}
						if got != w {
							t.Errorf("decide = %+v, want %+v", got, w)
						}
						if opted && node == nodeGone && !d.releaseAt.Equal(since.Add(delay)) {
							t.Errorf("releaseAt = %v, want %v", d.releaseAt, since.Add(delay))
						}
					})
				}
			}
		}
	}
}

func TestDecideOrphanedPV(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	long := now.Add(-time.Hour)
	opted := optIn{enabled: true, delay: time.Minute}
	for _, tc := range []struct {
		name string
		f    volumeFacts
		want decision
	}{
		{"claim gone, opted in, delay passed: the PV goes",
			volumeFacts{node: nodeGone, since: long, optIn: opted, claimGone: true},
			decision{stranded: true, action: actionRemoving, removePV: true, releaseAt: long.Add(time.Minute)}},
		{"claim gone, reclaim Retain: the PV stays",
			volumeFacts{node: nodeGone, since: long, optIn: opted, claimGone: true, retain: true},
			decision{stranded: true, action: actionKept, releaseAt: long.Add(time.Minute)}},
		{"claim gone, not opted in: the PV stays",
			volumeFacts{node: nodeGone, since: long, claimGone: true},
			decision{stranded: true, action: actionKept}},
		{"claim gone, delay not passed: waits (the node may come back and delete it itself)",
			volumeFacts{node: nodeGone, since: now, optIn: opted, claimGone: true},
			decision{stranded: true, action: actionWaiting, releaseAt: now.Add(time.Minute), recheck: time.Minute}},
		{"claim gone, node back: nothing",
			volumeFacts{node: nodeUp, since: long, optIn: opted, claimGone: true},
			decision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.f, now, time.Minute); got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseOptIn(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    optIn
		wantErr string
	}{
		{"", optIn{}, ""},
		{"false", optIn{}, ""},
		{"true", optIn{enabled: true, delay: 7 * time.Minute}, ""},
		{"15m", optIn{enabled: true, delay: 15 * time.Minute}, ""},
		{" 20s ", optIn{enabled: true, delay: 20 * time.Second}, ""},
		{" 5s", optIn{}, contract.AnnReleaseAfterNodeLoss + `: " 5s" is not "true", "false" or a duration of at least 10s (e.g. "15m")`},
		{"yes", optIn{}, contract.AnnReleaseAfterNodeLoss + `: "yes" is not "true", "false" or a duration of at least 10s (e.g. "15m")`},
	} {
		in := tc.in
		got, err := parseOptIn(in, 7*time.Minute)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parseOptIn(%q) error = %v, want %s", in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseOptIn(%q) = %+v, %v; want %+v", in, got, err, tc.want)
		}
	}
}
