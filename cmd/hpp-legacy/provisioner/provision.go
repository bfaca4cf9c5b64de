package provisioner

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// refusal is a claim this node will not serve as asked. Its message becomes
// the claim's ProvisioningFailed event, so it says what to change.
type refusal struct {
	result string // metrics label
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error {
	return &refusal{result: ResultRefused, msg: fmt.Sprintf(format, args...)}
}

// Provision creates the claim's directory on this node and returns its PV.
// The library calls it only for claims ShouldProvision accepted; it creates
// the PV object, emits the events for the returned error and retries with
// backoff.
func (p *Provisioner) Provision(ctx context.Context, opts controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	defer p.track()()
	claim := opts.PVC
	log := p.log.With(zap.String("claim", claimKey(claim)), zap.String("pv", opts.PVName))
	if v, why := decide(claim, opts.StorageClass, p.node); v != provision {
		// The claim changed between the library's check and this call.
		p.metrics.provision(ResultIgnored)
		return nil, controller.ProvisioningFinished, &controller.IgnoredError{Reason: why}
	}
	pv, err := p.provision(ctx, opts, log)
	if err == nil {
		p.metrics.provision(ResultProvisioned)
		log.Info("volume provisioned", zap.String("path", pv.Spec.HostPath.Path))
		return pv, controller.ProvisioningFinished, nil
	}
	var r *refusal
	if !errors.As(err, &r) {
		p.metrics.provision(ResultFailed)
		log.Error("provisioning failed", zap.Error(err))
		return nil, controller.ProvisioningFinished, err
	}
	p.metrics.provision(r.result)
	log.Warn("claim refused", zap.String("result", r.result), zap.String("reason", r.msg))
	if r.result == ResultNoSpace && claim.Annotations[contract.AnnProvisionOnNode] == "" {
		// The scheduler picked this node without knowing its free space
		// (legacy volumes publish no capacity); let it pick again.
		return nil, controller.ProvisioningReschedule, err
	}
	return nil, controller.ProvisioningFinished, err
}

func (p *Provisioner) provision(ctx context.Context, opts controller.ProvisionOptions, log *zap.Logger) (*v1.PersistentVolume, error) {
	claim, class := opts.PVC, opts.StorageClass
	if err := checkClaim(claim); err != nil {
		return nil, err
	}
	id, err := VolumeID(claim.Name, opts.PVName, p.prefix)
	if err != nil {
		return nil, &refusal{result: ResultRefused, msg: err.Error()}
	}
	hostname, err := p.hostname()
	if err != nil {
		return nil, err
	}
	request := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if err := p.checkSpace(ctx, id, request.Value(), request.String()); err != nil {
		return nil, err
	}
	vol, created, err := p.volumes.Create(ctx, id, dirvol.Spec{
		Ownership:     dirvol.Ownership{UID: -1, GID: -1},
		CapacityBytes: request.Value(),
		Kind:          dirvol.KindPersistent,
		Attributes:    map[string]string{"pv": opts.PVName, "claim": claimKey(claim), "claimUID": string(claim.UID)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating volume directory in %s: %w", p.pvDir, err)
	}
	if err := p.labeler.Relabel(ctx, vol.Path); err != nil {
		if created {
			// Nothing refers to the directory yet; the retry makes a new one.
			if derr := p.volumes.Delete(ctx, id); derr != nil {
				log.Error("removing unlabelled volume directory failed", zap.String("path", vol.Path), zap.Error(derr))
			}
		}
		return nil, fmt.Errorf("setting the SELinux label %s on %s: %w", "container_file_t", vol.Path, err)
	}
	if !created {
		log.Info("volume directory already existed; reusing it", zap.String("path", vol.Path))
	}
	p.noteLimits(ctx, claim, class.Name, class.MountOptions)
	return buildPV(pvParams{
		name: opts.PVName, path: vol.Path, node: p.node, hostname: hostname,
		claim: claim, class: class,
	}), nil
}

// checkClaim refuses what a hostPath directory cannot be.
func checkClaim(claim *v1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return refuse("volumeMode Block is not supported: %s volumes are directories on the node; use volumeMode: Filesystem", contract.LegacyProvisionerName)
	}
	if claim.Spec.Selector != nil {
		return refuse("spec.selector is not supported: a new hostPath volume has no labels to match it; remove the selector to get a new volume, or create a PersistentVolume yourself for a claim that must select one")
	}
	if src := dataSource(claim); src != nil {
		return refuse("cloning from %s %q is not supported: %s creates empty directories; create the claim without a data source", src.Kind, src.Name, contract.LegacyProvisionerName)
	}
	request, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if !ok || request.Sign() <= 0 {
		return refuse("spec.resources.requests.storage must be more than zero: it is the PV's capacity and what is checked against the node's free space")
	}
	return nil
}

// dataSource is the claim's clone source, if any (populator sources never
// reach Provision: ShouldProvision skips them).
func dataSource(claim *v1.PersistentVolumeClaim) *v1.TypedObjectReference {
	if ref := claim.Spec.DataSourceRef; ref != nil {
		return ref
	}
	if ds := claim.Spec.DataSource; ds != nil {
		return &v1.TypedObjectReference{APIGroup: ds.APIGroup, Kind: ds.Kind, Name: ds.Name}
	}
	return nil
}

// hostname is the value of this node's kubernetes.io/hostname label, which
// the PV's node affinity must match: it is not always the node name (cloud
// nodes, --hostname-override).
func (p *Provisioner) hostname() (string, error) {
	node, err := p.nodes.Get(p.node)
	if err != nil {
		return "", fmt.Errorf("reading Node %q for its %s label: %w", p.node, v1.LabelHostname, err)
	}
	hostname := node.Labels[v1.LabelHostname]
	if hostname == "" {
		return "", fmt.Errorf("node %q has no %s label, which the PV's node affinity needs (kubelet sets it when the node registers)", p.node, v1.LabelHostname)
	}
	return hostname, nil
}

// checkSpace refuses a request larger than what PV_DIR can offer now. A
// directory that already exists (a retry after the PV could not be saved)
// was counted when it was made, so it is not checked again.
func (p *Provisioner) checkSpace(ctx context.Context, id string, want int64, wantText string) error {
	_, err := p.volumes.Get(ctx, id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, dirvol.ErrNotFound) {
		return fmt.Errorf("checking for an existing volume directory: %w", err)
	}
	st, err := p.statfs(p.pvDir)
	if err != nil {
		return fmt.Errorf("reading free space of %s: %w", p.pvDir, err)
	}
	offered := capacity.Offered(st, p.headroom)
	if want <= offered {
		return nil
	}
	return &refusal{result: ResultNoSpace, msg: fmt.Sprintf(
		"requested %s (%d bytes) is more than the %s node %s can offer now in %s (%s available minus %s reserved headroom); free space on the node, request less, or use another node",
		wantText, want, formatBytes(offered), p.node, p.pvDir, formatBytes(st.AvailableBytes), formatBytes(p.headroom.Reserved(st.TotalBytes)))}
}

// noteLimits tells the claim's owner where hostPath differs from what the
// claim or class asked for, without refusing: both worked with the KubeVirt
// provisioner and refusing would break existing workloads.
func (p *Provisioner) noteLimits(ctx context.Context, claim *v1.PersistentVolumeClaim, className string, mountOptions []string) {
	for _, m := range claim.Spec.AccessModes {
		if m == v1.ReadWriteMany {
			p.events.claim(ctx, claim, v1.EventTypeNormal, ReasonSingleNode, fmt.Sprintf(
				"ReadWriteMany is honoured on node %s only: the volume is a directory on that node's disk, so every pod using this claim runs there", p.node))
			break
		}
	}
	if len(mountOptions) > 0 {
		p.events.claim(ctx, claim, v1.EventTypeWarning, ReasonMountOptionsIgnored, fmt.Sprintf(
			"StorageClass %q sets mountOptions %q, which are not copied to the PV: kubelet refuses to mount a hostPath volume that has mount options", className, mountOptions))
	}
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
