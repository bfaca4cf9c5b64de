package pools

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Copies nobody collects. A copy from another node outlives the
// CreateVolume that started it (copyjobs.go): the volume is committed when
// the copy ends, and only a later CreateVolume of the same name hands it
// to csi-provisioner, which then makes its PV. When no such call comes
// the volume would stay in the pool for ever, named by no PV: a volume
// only a PV's DeleteVolume removes. It happens for real: csi-provisioner
// v6.4.0 calls CreateVolume for a clone only while the source claim is not
// being deleted (getPVCSource), so a clone whose copy outlasts the first
// call and whose source is deleted meanwhile stays Pending; its copy ends
// here, and deleting the clone claim calls nothing, since it has no PV.
//
// So a volume made by a copy from another node is marked uncollected in
// its record (uncollectedAttr), in the same atomic commit that publishes
// it, until a CreateVolume returns it (collect): a restart, which forgets
// the copy jobs, still knows it from the record. A sweeper
// (RunUncollectedSweeper: at start, then every
// Config.UncollectedSweepInterval) asks the API server about each marked
// volume of this node and removes it, by the path DeleteVolume takes
// (trash, project quota, usage cache), only when both hold:
//
//   - the claim it was made for is gone: the API server answers NotFound
//     for the claim's namespace/name, or the claim there now has another
//     UID than the one the volume's name carries (csi-provisioner names a
//     volume <prefix>-<claim UID>; a name that does not end in a whole UID
//     is never taken as a replaced claim);
//   - no PersistentVolume has the volume's name (csi-provisioner names the
//     PV as the volume): one that does means the volume was handed over
//     (the mark's removal failed after it), and its PV's DeleteVolume
//     removes it; the mark is dropped then.
//
// Anything else keeps the volume: a claim that is there (Pending, or
// being deleted), an API server that cannot be reached or answers
// anything but NotFound, a mark that cannot be read. There is no grace
// period after the copy ends: the claim's existence, not time, says
// whether a CreateVolume may still come, and a claim that is gone is
// never provisioned. The check and the removal hold the volume's lock
// (Lock), which every CreateVolume holds while it looks for the volume
// and drops the mark, so a CreateVolume that collects the volume and the
// sweep never interleave. Removing is idempotent: a crash in the middle is
// finished by the store's recovery (trash) or by the next sweep.
//
// Only marks made on this node are swept: a shared pool's volumes are
// seen by every node, and the node that copied is the one that knows the
// job. The sweep runs only with Deps.Claims (the peer transport's API
// access): without it no copy from another node is made either.

// uncollectedAttr is the mark, in a volume's record attributes, of a copy
// from another node no CreateVolume has returned yet:
// "<claim namespace>/<claim name>@<node>", the claim it was made for and
// the node that copied it.
const uncollectedAttr = "hpp.kubevirt.io/uncollected"

// defaultUncollectedSweep is how often marked volumes are checked: once
// a minute costs a GET or two per marked volume, and there are only as
// many as copies waiting for csi-provisioner's retry.
const defaultUncollectedSweep = time.Minute

// ClaimLookup is the API access of the sweep: small, so that tests fake
// it. Implemented by kubeapi.Sources.
type ClaimLookup interface {
	// ClaimUID returns the UID of the claim namespace/name; found is false
	// only when the API server says it does not exist.
	ClaimUID(ctx context.Context, namespace, name string) (uid string, found bool, err error)
	// PersistentVolumeExists reports whether the PV name exists; false
	// only when the API server says it does not.
	PersistentVolumeExists(ctx context.Context, name string) (bool, error)
}

// uncollectedMark is the mark's value for claim, copied by node.
func uncollectedMark(claim ClaimRef, node string) string {
	return claim.Namespace + "/" + claim.Name + "@" + node
}

// parseUncollectedMark reads a mark; ok is false for one that is not
// "<namespace>/<name>@<node>".
func parseUncollectedMark(mark string) (claim ClaimRef, node string, ok bool) {
	who, node, ok := strings.Cut(mark, "@")
	if !ok || node == "" {
		return ClaimRef{}, "", false
	}
	ns, name, ok := strings.Cut(who, "/")
	if !ok || ns == "" || name == "" {
		return ClaimRef{}, "", false
	}
	return ClaimRef{Namespace: ns, Name: name}, node, true
}

// markUncollected returns c with the mark in its attributes (a copy of
// the map: the request's must not change).
func (rt *Runtime) markUncollected(c Creation) Creation {
	c.Spec.Attributes = maps.Clone(c.Spec.Attributes)
	if c.Spec.Attributes == nil {
		c.Spec.Attributes = map[string]string{}
	}
	c.Spec.Attributes[uncollectedAttr] = uncollectedMark(c.Claim, rt.cfg.NodeID)
	return c
}

// collect hands vol, accepted by a CreateVolume, over: its mark, if it
// has one, is removed before the answer goes. If the removal fails the
// answer is the error (the CO retries): a mark left on a volume that was
// handed over would be harmless (its PV keeps it), but answering success
// while the record says otherwise is what a person reading it would trip
// over.
func (rt *Runtime) collect(ctx context.Context, vol Volume) (Volume, error) {
	if _, marked := vol.Attributes[uncollectedAttr]; !marked {
		return vol, nil
	}
	got, err := vol.store.SetAttribute(ctx, vol.ID, uncollectedAttr, "")
	if err != nil {
		return Volume{}, wrap("recording that the copied volume "+vol.ID+" was collected", err)
	}
	rt.uncollected.drop(vol.ID)
	vol.Volume = got
	return vol, nil
}

// uncollectedSet is what the sweep checks: the marked volumes of this node
// by id, and the pools already read for marks (at start, or once a pool
// that was not ready opens).
type uncollectedSet struct {
	mu      sync.Mutex
	ids     map[string]struct{}
	scanned map[*poolState]bool
}

func newUncollectedSet() *uncollectedSet {
	return &uncollectedSet{ids: map[string]struct{}{}, scanned: map[*poolState]bool{}}
}

func (s *uncollectedSet) add(id string) {
	s.mu.Lock()
	s.ids[id] = struct{}{}
	s.mu.Unlock()
}

func (s *uncollectedSet) drop(id string) {
	s.mu.Lock()
	delete(s.ids, id)
	s.mu.Unlock()
}

func (s *uncollectedSet) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.ids))
}

// RunUncollectedSweeper sweeps (SweepUncollected) at once, then every
// Config.UncollectedSweepInterval, until ctx ends. A sweep's failure is
// logged and the next one tries again.
func (rt *Runtime) RunUncollectedSweeper(ctx context.Context) {
	if rt.deps.Claims == nil {
		return
	}
	tick := time.NewTicker(rt.cfg.UncollectedSweepInterval)
	defer tick.Stop()
	for {
		if _, err := rt.SweepUncollected(ctx); err != nil && ctx.Err() == nil {
			rt.log.Warn("uncollected copies: some were not checked; next sweep retries", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// SweepUncollected reads the pools not read yet for marks, then checks
// every marked volume of this node, and returns the ids it removed. An
// error (a pool's listing, the API server) leaves the volumes it concerns
// in place and marked, for the next sweep; the others are still checked.
func (rt *Runtime) SweepUncollected(ctx context.Context) ([]string, error) {
	if rt.deps.Claims == nil {
		return nil, nil
	}
	var errs []error
	// A pool that is not open yet is read by a later sweep.
	for _, p := range rt.usable() {
		if err := rt.scanUncollected(ctx, p); err != nil {
			errs = append(errs, err)
		}
	}
	var removed []string
	for _, id := range rt.uncollected.list() {
		gone, err := rt.sweepOne(ctx, id)
		if err != nil {
			errs = append(errs, err)
		}
		if gone {
			removed = append(removed, id)
		}
	}
	return removed, errors.Join(errs...)
}

// scanUncollected adds p's volumes marked by this node to the set, once
// per pool.
func (rt *Runtime) scanUncollected(ctx context.Context, p usablePool) error {
	rt.uncollected.mu.Lock()
	done := rt.uncollected.scanned[p.poolState]
	rt.uncollected.mu.Unlock()
	if done {
		return nil
	}
	vols, err := p.store.List(ctx)
	if err != nil {
		return wrap("listing the volumes of pool "+p.name()+" for uncollected copies", err)
	}
	for _, v := range vols {
		rt.noteUncollected(v)
	}
	rt.uncollected.mu.Lock()
	rt.uncollected.scanned[p.poolState] = true
	rt.uncollected.mu.Unlock()
	return nil
}

// sweepOne checks the marked volume id under its lock and removes it when
// its claim is gone and no PV names it; it reports whether it did. A busy
// volume (a CreateVolume or DeleteVolume of it runs) is left for the next
// sweep.
func (rt *Runtime) sweepOne(ctx context.Context, id string) (bool, error) {
	release, err := rt.Lock(id)
	if err != nil {
		return false, nil
	}
	defer release()
	vol, err := rt.FindOwn(ctx, id, "")
	switch {
	case isNotFound(err):
		rt.uncollected.drop(id)
		return false, nil
	case err != nil:
		return false, err
	}
	mark, marked := vol.Attributes[uncollectedAttr]
	if !marked {
		rt.uncollected.drop(id)
		return false, nil
	}
	claim, node, ok := parseUncollectedMark(mark)
	if !ok || node != rt.cfg.NodeID {
		// Not a mark this node can act on: kept, and not asked again.
		rt.uncollected.drop(id)
		if !ok {
			rt.log.Warn("uncollected copy: unreadable mark, the volume is kept", zap.String("volume", id), zap.String("mark", mark))
		}
		return false, nil
	}
	why, err := rt.claimGone(ctx, id, claim)
	if err != nil || why == "" {
		return false, err
	}
	pv, err := rt.deps.Claims.PersistentVolumeExists(ctx, id)
	if err != nil {
		return false, wrap("uncollected copy "+id+": looking up its PersistentVolume", err)
	}
	if pv {
		// Handed over after all (a CreateVolume whose removal of the
		// mark failed): the PV owns it now.
		if _, err := rt.collect(ctx, vol); err != nil {
			return false, err
		}
		return false, nil
	}
	if err := rt.Delete(ctx, vol, "uncollected copy"); err != nil {
		return false, err
	}
	rt.uncollected.drop(id)
	rt.log.Warn("removed a volume copied from another node that no CreateVolume collected: its claim is gone and no PersistentVolume names it",
		zap.String("volume", id), zap.String("pool", vol.Pool()), zap.String("claim", claim.Namespace+"/"+claim.Name), zap.String("reason", why),
		zap.Time("created", vol.Created))
	return true, nil
}

// claimGone says why claim, for which volume id was made, is gone ("" when
// it is not): NotFound, or there under another UID than id's.
func (rt *Runtime) claimGone(ctx context.Context, id string, claim ClaimRef) (string, error) {
	uid, found, err := rt.deps.Claims.ClaimUID(ctx, claim.Namespace, claim.Name)
	switch {
	case err != nil:
		return "", wrap("uncollected copy "+id+": looking up claim "+claim.Namespace+"/"+claim.Name, err)
	case !found:
		return "the claim does not exist", nil
	case strings.HasSuffix(id, "-"+uid):
		return "", nil
	}
	if named := uidSuffix.FindString(id); named != "" && !strings.EqualFold(named[1:], uid) {
		return "the claim was replaced (its UID is " + uid + ", the volume was made for " + named[1:] + ")", nil
	}
	// The name carries no whole UID (csi-provisioner's
	// --volume-name-uuid-length): a claim of that name may be the one.
	return "", nil
}

// uidSuffix is a whole UID ending a volume name, with its dash.
var uidSuffix = regexp.MustCompile(`-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// noteUncollected adds vol (just committed by a copy job, or read from a
// pool at start) to the set when it carries this node's mark.
func (rt *Runtime) noteUncollected(vol dirvol.Volume) {
	if _, node, ok := parseUncollectedMark(vol.Attributes[uncollectedAttr]); ok && node == rt.cfg.NodeID {
		rt.uncollected.add(vol.ID)
	}
}
