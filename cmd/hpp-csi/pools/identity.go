package pools

import (
	"fmt"

	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// ReasonPoolIdentityChanged is the volume health reason of such a volume.
const ReasonPoolIdentityChanged = "PoolIdentityChanged"

// ensurePoolIdentity gives a directory pool its marker, and so its
// identity, when it has none (first start, or a new disk). A mounted
// pool's marker is hpp-mounter's: hpp-csi never writes it.
func ensurePoolIdentity(cfg pool.Pool, node string) error {
	if cfg.Mounted {
		return nil
	}
	if err := poolmarker.Ensure(cfg.Path, poolmarker.Marker{Pool: cfg.Name, Node: node, CreatedBy: "hpp-csi"}); err != nil {
		return fmt.Errorf("pool identity marker: %w", err)
	}
	return nil
}

// poolIdentity is the pool's identity now ("" without one); it reads the
// marker each time, so a marker replaced behind hpp-csi's back is seen.
func poolIdentity(p *poolState) (string, error) {
	m, err := poolmarker.Read(p.cfg.Path)
	if err != nil {
		return "", err
	}
	return m.ID, nil
}

// PoolIdentity is the identity of the volume's pool now ("" without one),
// which a new volume's context records.
func (v Volume) PoolIdentity() (string, error) { return poolIdentity(v.pool) }

// CheckIdentity refuses to publish volume id, recorded in the named pool
// with identity want, when the pool's identity now is another, and
// remembers why for the health RPCs (which get no volume context).
func (rt *Runtime) CheckIdentity(id, poolName, want string) error {
	if want == "" {
		return nil
	}
	p, ok := rt.poolNamed(poolName)
	if !ok {
		return nil // the lookup that follows says what is wrong
	}
	got, err := poolIdentity(p)
	if err == nil && got == want {
		rt.mismatches.forget(id)
		return nil
	}
	now := "identity " + got
	switch {
	case err != nil:
		now = fmt.Sprintf("no identity (%v)", err)
	case got == "":
		now = "a marker without identity"
	}
	msg := fmt.Sprintf("volume %q was created in storage pool %q with pool identity %s, but the pool at %s on node %s now has %s: "+
		"its disk was replaced or re-created since (a new disk at the same path, or a node recreated under the same name), so the volume's data is not there; "+
		"hpp-csi does not publish an empty directory in its place. Mount the original disk back, or delete the claim so a new volume is made",
		id, p.name(), want, p.cfg.Path, rt.cfg.NodeID, now)
	rt.mismatches.record(id, Problem{Unreachable: true, Reason: ReasonPoolIdentityChanged, Message: msg})
	return refuse(Precondition, "%s", msg)
}
