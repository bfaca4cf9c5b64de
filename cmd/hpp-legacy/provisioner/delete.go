package provisioner

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// owner returns the node that owns a PV's directory, or why no node does.
func owner(pv *v1.PersistentVolume) (string, string) {
	if id, ok := pv.Annotations[contract.AnnIdentity]; ok && id != contract.LegacyProvisionerName {
		return "", fmt.Sprintf("%s is %q, not %q", contract.AnnIdentity, id, contract.LegacyProvisionerName)
	}
	if pv.Spec.HostPath == nil {
		return "", "it is not a hostPath volume"
	}
	node := pv.Annotations[contract.AnnProvisionOnNode]
	if node == "" {
		return "", fmt.Sprintf("it has no %s annotation naming the node that owns the directory", contract.AnnProvisionOnNode)
	}
	return node, ""
}

// ShouldDelete is the library's DeletionGuard: only the owning node goes on
// to Delete, so the other nodes neither touch the directory nor emit events.
func (p *Provisioner) ShouldDelete(ctx context.Context, pv *v1.PersistentVolume) bool {
	node, why := owner(pv)
	p.log.Debug("volume checked", zap.String("pv", pv.Name), zap.String("owner", node),
		zap.String("phase", string(pv.Status.Phase)), zap.String("reclaimPolicy", string(pv.Spec.PersistentVolumeReclaimPolicy)))
	if node == "" && pv.Spec.HostPath != nil && pv.Status.Phase == v1.VolumeReleased &&
		pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		// Every node reaches this; the event's fixed name makes it one.
		p.events.volume(ctx, pv, v1.EventTypeWarning, ReasonNoOwner, fmt.Sprintf(
			"no node will delete this volume's directory %s: %s; remove the directory on its node by hand, then delete this PV", pv.Spec.HostPath.Path, why))
	}
	return node == p.node
}

// Delete removes a released PV's directory on its owning node. A path that
// is not a volume directly inside PV_DIR is refused and left alone; the
// library turns the error into a VolumeFailedDelete event and keeps the PV.
// The library calls Delete only for the Delete reclaim policy: Retain leaves
// the directory.
func (p *Provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	defer p.track()()
	log := p.log.With(zap.String("pv", pv.Name))
	// The library also calls Delete to clean up after a PV it could not
	// save, without asking ShouldDelete first.
	if node, why := owner(pv); node != p.node {
		if why == "" {
			why = fmt.Sprintf("it belongs to node %q", node)
		}
		p.metrics.delete(ResultIgnored)
		return &controller.IgnoredError{Reason: why}
	}
	id, err := p.volumeIDOf(pv.Spec.HostPath.Path)
	if err != nil {
		p.metrics.delete(ResultRefused)
		log.Warn("volume deletion refused", zap.String("path", pv.Spec.HostPath.Path), zap.Error(err))
		return err
	}
	if err := p.volumes.Delete(ctx, id); err != nil {
		p.metrics.delete(ResultFailed)
		log.Error("volume deletion failed", zap.String("path", pv.Spec.HostPath.Path), zap.Error(err))
		return fmt.Errorf("removing %s: %w", pv.Spec.HostPath.Path, err)
	}
	p.metrics.delete(ResultDeleted)
	log.Info("volume deleted", zap.String("path", pv.Spec.HostPath.Path))
	return nil
}

// volumeIDOf returns the volume directory name of a PV's hostPath, which
// must name a direct child of PV_DIR that resolves inside it (no symbolic
// link out). Anything else was not made by this provisioner here: a PV from
// before PV_DIR changed, or one edited by hand.
func (p *Provisioner) volumeIDOf(path string) (string, error) {
	refused := func(why string) error {
		return fmt.Errorf("refusing to delete hostPath %q: %s; nothing was removed (remove it by hand if it really is this volume's data)", path, why)
	}
	if !filepath.IsAbs(path) {
		return "", refused("it is not an absolute path")
	}
	clean := filepath.Clean(path)
	if filepath.Dir(clean) != p.pvDir {
		return "", refused(fmt.Sprintf("it is not a directory directly inside PV_DIR %s", p.pvDir))
	}
	id := filepath.Base(clean)
	if _, err := pool.ResolveIn(p.pvDir, id); err != nil {
		return "", refused(err.Error())
	}
	return id, nil
}
