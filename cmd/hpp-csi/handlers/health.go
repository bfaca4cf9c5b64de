package handlers

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
)

func volumeHealth(id string, problems []pools.Problem) *csi.VolumeHealth {
	h := &csi.VolumeHealth{VolumeId: id}
	for _, pr := range problems {
		st := csi.VolumeHealthErrorType_DEGRADED
		if pr.Unreachable {
			st = csi.VolumeHealthErrorType_INACCESSIBLE
		}
		h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{Status: st, Reason: pr.Reason, Message: pr.Message})
	}
	return h
}

// volumeProblems checks the volume id and reads the volume's problems, as
// both volume health calls do; op names the call in the gRPC error.
func (d *Driver) volumeProblems(ctx context.Context, op, id string) ([]pools.Problem, error) {
	if err := validateVolumeID(id); err != nil {
		return nil, err
	}
	problems, err := d.pools.VolumeProblems(ctx, id)
	if err != nil {
		return nil, toStatus(op, err)
	}
	return problems, nil
}

func (d *Driver) ControllerGetVolumeHealth(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	problems, err := d.volumeProblems(ctx, "ControllerGetVolumeHealth", req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), problems)}, nil
}

// ControllerListVolumeHealth returns only volumes with a problem, as the
// spec asks, paged with the same tokens as ListVolumes.
func (d *Driver) ControllerListVolumeHealth(ctx context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	unhealthy, err := d.pools.Unhealthy(ctx)
	if err != nil {
		return nil, toStatus("ControllerListVolumeHealth", err)
	}
	entries, next, err := page(d, unhealthy, func(u pools.VolumeWithProblems) (string, string) { return u.Volume.Pool(), u.Volume.ID },
		req.GetMaxEntries(), req.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ControllerListVolumeHealthResponse{NextToken: next}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, volumeHealth(e.Volume.ID, e.Problems))
	}
	return resp, nil
}

func (d *Driver) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	problems, err := d.volumeProblems(ctx, "NodeGetVolumeHealth", req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if target := req.GetVolumePublishPath(); target != "" {
		if err := validatePath("volume_publish_path", target); err != nil {
			return nil, err
		}
		if pr, ok := d.pools.TargetProblem(req.GetVolumeId(), target); ok {
			problems = append(problems, pr)
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), problems)}, nil
}

func (d *Driver) NodeGetStorageHealth(context.Context, *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	// The spec forbids two entries with the same (status, reason), so
	// pools with the same problem share one entry naming all of them.
	resp := &csi.NodeGetStorageHealthResponse{}
	index := map[string]*csi.NodeGetStorageHealthResponse_StorageBackendHealth{}
	for _, pr := range d.pools.StorageProblems() {
		st := csi.StorageHealthErrorType_STORAGE_DEGRADED
		if pr.Unreachable {
			st = csi.StorageHealthErrorType_STORAGE_UNREACHABLE
		}
		key := st.String() + "/" + pr.Reason
		if e, ok := index[key]; ok {
			e.Message += "; " + pr.Message
			continue
		}
		e := &csi.NodeGetStorageHealthResponse_StorageBackendHealth{Status: st, Reason: pr.Reason, Message: pr.Message}
		index[key] = e
		resp.BackendHealth = append(resp.BackendHealth, e)
	}
	return resp, nil
}
