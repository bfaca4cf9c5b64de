package driver

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
	"github.com/hostpath-provisioner/hpp/internal/poolmarker"
)

// reasonPoolIdentityChanged is the volume health reason of such a volume.
const reasonPoolIdentityChanged = "PoolIdentityChanged"

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

// volumeContextIdentity adds the pool's identity to a new volume's context.
func (d *Driver) volumeContextIdentity(p *poolState, volCtx map[string]string) {
	if id, err := poolIdentity(p); err == nil && id != "" {
		volCtx[contract.VolumeContextPoolID] = id
	} else if err != nil {
		d.log.Warn("storage pool has no identity marker; the volume is created without one", zap.String("pool", p.name()), zap.Error(err))
	}
}

// checkPoolIdentity refuses to publish a volume whose recorded pool
// identity is not the pool's identity now, and remembers why for the
// health RPCs (which get no volume context).
func (d *Driver) checkPoolIdentity(id string, volCtx map[string]string) error {
	want := volCtx[contract.VolumeContextPoolID]
	if want == "" {
		return nil
	}
	p, ok := d.poolNamed(volCtx[contract.ParamStoragePool])
	if !ok {
		return nil // the lookup that follows says what is wrong
	}
	got, err := poolIdentity(p)
	if err == nil && got == want {
		d.mismatches.forget(id)
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
		id, p.name(), want, p.cfg.Path, d.cfg.NodeID, now)
	d.mismatches.record(id, problem{unreachable: true, reason: reasonPoolIdentityChanged, message: msg})
	return failedPrecondition("%s", msg)
}
