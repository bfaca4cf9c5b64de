package driver

import (
	"context"
	"errors"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hostpath-provisioner/hpp/internal/version"
)

func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	v := d.cfg.VendorVersion
	if v == "" {
		v = version.Version
	}
	return &csi.GetPluginInfoResponse{Name: d.cfg.DriverName, VendorVersion: v}, nil
}

func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		// Expansion only changes the recorded size: it works while the
		// volume is in use, with no node step.
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

// Probe is ready only when every pool is usable: a node whose pool disk is
// not mounted must not be offered volumes. Pools that hpp-mounter mounts
// ("mounted") are the exception (see Ready).
func (d *Driver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(d.Ready(ctx) == nil)}, nil
}

// Ready returns nil when every pool is open and healthy enough to serve, or
// an error naming each pool that is not (for /healthz and logs).
//
// A pool that hpp-mounter mounts ("mounted": true) does not count: it is
// unmounted by design until its mounter pod runs, and while a mounter is
// replaced. Counting it would fail the liveness probe (kubelet restarting
// the driver in a loop) and hold csi-provisioner, which waits for Probe,
// away from the node's other pools. Such a pool is refused per request
// instead (Unavailable, naming the missing marker), offers zero capacity,
// and its mounter's own readiness says whether it is mounted.
func (d *Driver) Ready(ctx context.Context) error {
	var problems []string
	for _, p := range d.pools {
		if p.cfg.Mounted {
			continue
		}
		if _, err := d.storeOf(p.own); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, pr := range d.rootProblems(p, p.own) {
			if pr.unreachable {
				problems = append(problems, pr.message)
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
