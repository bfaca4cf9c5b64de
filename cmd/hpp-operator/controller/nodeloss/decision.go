package nodeloss

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// What hpp does when a node goes away (the node-loss controller,
// reconciler.go). A hostpath volume lives on one node's disk: when that node
// is gone its PV stays pinned there, its pods stay Pending, and no
// csi-provisioner is left to delete it. hpp always reports such volumes;
// it releases a claim only when asked to (contract.AnnReleaseAfterNodeLoss) and
// only once the Node object itself is deleted, the one sure sign that the
// machine and its disk are gone. A NotReady node may come back with its
// disk (a reboot, a network split); a cordoned or drained node is Ready
// and is never looked at.

// MinReleaseDelay keeps a typo ("10s" for "10m") from releasing a claim
// while a re-registering node is still on its way back.
const MinReleaseDelay = 10 * time.Second

// nodeState is what the API server says about the node a volume lives on.
type nodeState int

const (
	// nodeUp: the Node exists and is Ready (cordoned or drained included).
	nodeUp nodeState = iota
	// nodeNotReady: the Node exists, its Ready condition is not True.
	nodeNotReady
	// nodeGone: the Node object is deleted (or being deleted).
	nodeGone
)

func (s nodeState) String() string {
	return [...]string{"up", "NotReady", "gone"}[s]
}

// optIn is a volume's release setting, parsed.
type optIn struct {
	enabled bool
	delay   time.Duration
}

// parseOptIn reads an contract.AnnReleaseAfterNodeLoss value; "" is not opted in.
func parseOptIn(v string, defaultDelay time.Duration) (optIn, error) {
	switch strings.TrimSpace(v) {
	case "", "false":
		return optIn{}, nil
	case "true":
		return optIn{enabled: true, delay: defaultDelay}, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < MinReleaseDelay {
		return optIn{}, fmt.Errorf("%s: %q is not \"true\", \"false\" or a duration of at least %s (e.g. \"15m\")",
			contract.AnnReleaseAfterNodeLoss, v, MinReleaseDelay)
	}
	return optIn{enabled: true, delay: d}, nil
}

func (o optIn) String() string {
	if !o.enabled {
		return "false"
	}
	return strconv.Quote(o.delay.String())
}

// volumeFacts is everything the decision needs about one volume.
type volumeFacts struct {
	node nodeState
	// since: when the node was first seen gone, or its Ready condition's
	// last transition.
	since time.Time
	optIn optIn
	// claimGone: the PV has no claim any more (released, or never bound).
	claimGone bool
	// inUse: a pod on a live node, not finished, uses the claim.
	inUse bool
	// retain: the PV's reclaim policy is Retain: its object is the user's.
	retain bool
}

// The actions a volume's entry in the CR status shows.
const (
	actionKept      = "Kept"
	actionWaiting   = "Waiting"
	actionInUse     = "InUse"
	actionReleasing = "Releasing"
	actionRemoving  = "Removing"
)

// decision is what to do with one volume now.
type decision struct {
	// stranded: report the volume (event, status, metric).
	stranded bool
	action   string
	// releaseAt is when an opted-in volume is (or was) due.
	releaseAt time.Time
	// release: delete the claim (and the pods that wait for it, which no
	// node runs), so its StatefulSet makes a new one on a live node.
	release bool
	// removePV: delete the orphaned PV, whose csi-provisioner is gone.
	removePV bool
	// recheck: look again after this long (0: only on a change).
	recheck time.Duration
}

// inUseRecheck: pods are read, not watched; a claim in use is looked at
// again this often.
const inUseRecheck = 30 * time.Second

// decide is the decision table of the node-loss controller. grace is how
// long a node may be NotReady before its volumes are reported.
func decide(f volumeFacts, now time.Time, grace time.Duration) decision {
	switch f.node {
	case nodeUp:
		// Never lost, or back: whatever was pending is cancelled.
		return decision{}
	case nodeNotReady:
		if wait := f.since.Add(grace).Sub(now); wait > 0 {
			return decision{recheck: wait}
		}
		// Reported only, opted in or not: the node still exists.
		return decision{stranded: true, action: actionKept}
	}
	d := decision{stranded: true, action: actionKept}
	if !f.optIn.enabled {
		return d
	}
	d.releaseAt = f.since.Add(f.optIn.delay)
	if wait := d.releaseAt.Sub(now); wait > 0 {
		d.action, d.recheck = actionWaiting, wait
		return d
	}
	switch {
	case f.claimGone && f.retain:
		// The user keeps released PVs: the object stays, reported.
	case f.claimGone:
		d.action, d.removePV = actionRemoving, true
	case f.inUse:
		d.action, d.recheck = actionInUse, inUseRecheck
	default:
		d.action, d.release = actionReleasing, true
	}
	return d
}
