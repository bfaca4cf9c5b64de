package provisioner

import (
	"errors"
	"fmt"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// VolumeID is the directory name of a claim's volume inside PV_DIR: the PV
// name, or "<claim name>-<PV name>" with USE_NAMING_PREFIX, exactly as the
// KubeVirt provisioner names them. The error says how to fix the claim when
// the name cannot be one directory entry (a long claim name with the prefix).
func VolumeID(claimName, pvName string, prefix bool) (string, error) {
	id := pvName
	if prefix {
		id = claimName + "-" + pvName
	}
	err := pool.ValidateID(id)
	if err == nil {
		return id, nil
	}
	var fe *fieldrule.FieldError
	if prefix && len(id) > pool.MaxIDLen && errors.As(err, &fe) {
		return "", fmt.Errorf("the volume directory name %q would be %d bytes, more than the %d a directory name may have: with USE_NAMING_PREFIX=true the claim name may be at most %d characters; use a shorter claim name",
			truncate(id, 64), len(id), pool.MaxIDLen, pool.MaxIDLen-len(pvName)-1)
	}
	return "", fmt.Errorf("the volume directory name is not usable: %w", err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
