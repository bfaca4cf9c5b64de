package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func volumeHealth(id string, problems []problem) *csi.VolumeHealth {
	h := &csi.VolumeHealth{VolumeId: id}
	for _, pr := range problems {
		st := csi.VolumeHealthErrorType_DEGRADED
		if pr.unreachable {
			st = csi.VolumeHealthErrorType_INACCESSIBLE
		}
		h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{Status: st, Reason: pr.reason, Message: pr.message})
	}
	return h
}

// volumeProblems finds what is wrong with one volume: its pool's problems
// plus its own directory. A volume whose metadata survives but whose
// directory is gone was removed behind the driver's back.
func (d *Driver) volumeProblems(ctx context.Context, id string) ([]problem, error) {
	if pr, ok := d.mismatches.get(id); ok {
		// Its data is on another disk: nothing here describes it.
		return []problem{pr}, nil
	}
	l, err := d.findVolume(ctx, id, "")
	if err == nil {
		return d.volumeProblemsOf(l), nil
	}
	if status.Code(err) == codes.Unavailable {
		// Not on any usable pool, and some pool cannot be read: the
		// volume is most likely there, and that pool's problem is its.
		return d.unusableRootProblems(), nil
	}
	if !isNotFound(err) {
		return nil, err
	}
	if problems, ok, merr := d.findMissing(ctx, id); ok || merr != nil {
		return problems, merr
	}
	return nil, err
}

func (d *Driver) ControllerGetVolumeHealth(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	problems, err := d.volumeProblems(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), problems)}, nil
}

// ControllerListVolumeHealth returns only volumes with a problem, as the
// spec asks, paged with the same tokens as ListVolumes.
func (d *Driver) ControllerListVolumeHealth(ctx context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	var abnormal []listed
	byID := map[string][]problem{}
	for _, p := range d.pools {
		store, err := d.storeOf(p.own)
		if err != nil {
			continue
		}
		poolProblems := d.rootProblems(p, p.own)
		vols, err := store.List(ctx)
		if err != nil {
			return nil, toStatus("listing volumes of pool "+p.name(), err)
		}
		missing, err := store.Missing(ctx)
		if err != nil {
			return nil, toStatus("listing missing volumes of pool "+p.name(), err)
		}
		for _, v := range mergeByID(vols, missing) {
			problems := append([]problem(nil), poolProblems...)
			if v.missing {
				problems = append(problems, missingDirProblem(p, v.Volume))
			} else {
				problems = append(problems, unenforcedProblem(located{pool: p, root: p.own, store: store, vol: v.Volume})...)
			}
			if len(problems) > 0 {
				abnormal = append(abnormal, listed{pool: p, vol: v.Volume})
				byID[v.ID] = problems
			}
		}
	}
	entries, next, err := d.page(abnormal, req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ControllerListVolumeHealthResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, volumeHealth(e.vol.ID, byID[e.vol.ID]))
	}
	return resp, nil
}

type maybeMissing struct {
	dirvol.Volume
	missing bool
}

// mergeByID merges two id-sorted lists so paging stays in id order.
func mergeByID(present, missing []dirvol.Volume) []maybeMissing {
	out := make([]maybeMissing, 0, len(present)+len(missing))
	i, j := 0, 0
	for i < len(present) || j < len(missing) {
		if j >= len(missing) || i < len(present) && present[i].ID < missing[j].ID {
			out = append(out, maybeMissing{Volume: present[i]})
			i++
			continue
		}
		out = append(out, maybeMissing{Volume: missing[j], missing: true})
		j++
	}
	return out
}

func (d *Driver) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	if err := validateVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	problems, err := d.volumeProblems(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if target := req.GetVolumePublishPath(); target != "" {
		if err := validatePath("volume_publish_path", target); err != nil {
			return nil, err
		}
		if exists, _ := d.deps.FS.Exists(target); exists {
			if mounted, merr := d.deps.Mounter.IsMountPoint(target); merr == nil && !mounted {
				problems = append(problems, problem{unreachable: true, reason: reasonTargetNotMounted, message: fmt.Sprintf(
					"volume %q: %s is not mounted; the pod writes to the node's disk instead of the volume", req.GetVolumeId(), target)})
			}
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), problems)}, nil
}

func (d *Driver) NodeGetStorageHealth(context.Context, *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	// The spec forbids two entries with the same (status, reason), so
	// pools with the same problem share one entry naming all of them.
	resp := &csi.NodeGetStorageHealthResponse{}
	index := map[string]*csi.NodeGetStorageHealthResponse_StorageBackendHealth{}
	for _, p := range d.pools {
		for _, pr := range append(d.rootProblems(p, p.own), d.rootProblems(p, p.legacy)...) {
			st := csi.StorageHealthErrorType_STORAGE_DEGRADED
			if pr.unreachable {
				st = csi.StorageHealthErrorType_STORAGE_UNREACHABLE
			}
			key := st.String() + "/" + pr.reason
			if e, ok := index[key]; ok {
				e.Message += "; " + pr.message
				continue
			}
			e := &csi.NodeGetStorageHealthResponse_StorageBackendHealth{Status: st, Reason: pr.reason, Message: pr.message}
			index[key] = e
			resp.BackendHealth = append(resp.BackendHealth, e)
		}
	}
	return resp, nil
}
