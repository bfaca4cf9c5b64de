package quotanode

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/grpctest"
)

// A pool that asks for enforced sizes on a filesystem that cannot give
// them is not ready, and says what to add: never silently unenforced. Run
// only where the kernel has project quotas (the first subtest of each
// filesystem proves it), so that what is missing is the filesystem's
// preparation, not the kernel.
func TestNotReadyNamesWhatToAdd(t *testing.T) {
	cases := []struct {
		name, kind string
		mkfsArgs   []string
		opts       string
		want       string
	}{
		{"xfs without prjquota", "xfs", nil, "",
			"is XFS without project quotas enforced; mount it with the prjquota option"},
		// ext4 refuses prjquota without the project feature.
		{"ext4 without the features", "ext4", nil, "",
			"is ext4 without project quota accounting; add the features with tune2fs -O project,quota <device> while it is unmounted"},
		{"ext4 with the features, without prjquota", "ext4", []string{"-O", "project,quota"}, "",
			"is ext4 with project quotas counted but not enforced; mount it with the prjquota option"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			quotaFS(t, tc.kind) // skips where the kernel has no project quotas
			mnt := loopFS(t, tc.kind, tc.mkfsArgs, tc.opts)
			d := startEnforcingDriver(t, mnt)
			c := d.Client(t)
			_, err := c.CreateVolume(t.Context(), createRequest("pvc-refused", 10*MiB))
			grpctest.WantCode(t, err, codes.Unavailable, `storage pool "q" is not ready: enforceSize: `, tc.want)
			st := status.Convert(err)
			t.Logf("CreateVolume: %s: %s", st.Code(), st.Message())
			probe, err := c.Probe(t.Context(), &csi.ProbeRequest{})
			if err != nil || probe.GetReady().GetValue() {
				t.Fatalf("Probe = %v, %v; want not ready", probe, err)
			}
			capacity, err := c.GetCapacity(t.Context(), &csi.GetCapacityRequest{Parameters: map[string]string{contract.ParamStoragePool: poolName}})
			if err != nil || capacity.GetAvailableCapacity() != 0 {
				t.Fatalf("GetCapacity = %v, %v; want nothing offered by a pool that is not ready", capacity, err)
			}
		})
	}
}
