package handlers

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// StorageClass parameters hpp-csi understands besides the KubeVirt driver's
// (contract.ParamStoragePool, contract.ParamOverlayCSI): hpp's own, so
// non-root pods can own their volume without an init container.
const (
	ParamDirectoryUID = "directoryUID"
	ParamDirectoryGID = "directoryGID"
	// ParamDirectoryMode is an octal permission string such as "0770".
	ParamDirectoryMode = "directoryMode"
)

// Keys with these prefixes are set by Kubernetes components (for example
// csi-provisioner's --extra-create-metadata) and are no StorageClass
// parameters; of them only the claim's namespace and name are read (a copy
// from another node is served for a named claim).
var ignoredParamPrefixes = []string{"csi.storage.k8s.io/", "kubevirt.io/", "hostpath.csi/"}

const maxID = 1<<31 - 1

// volumeParams is the parsed, validated parameter map of a request.
type volumeParams struct {
	storagePool string
	ownership   dirvol.Ownership
	// claim is the PVC the volume is for; empty without
	// --extra-create-metadata.
	claim pools.ClaimRef
}

// parseParams validates every parameter and reports all problems at once.
// Unknown keys are errors: a typo such as "storagepool" would otherwise put
// the volume on the default pool without anyone noticing.
func parseParams(params map[string]string) (volumeParams, error) {
	p := volumeParams{ownership: dirvol.Ownership{UID: -1, GID: -1}}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		var err error
		switch k {
		case contract.ParamStoragePool:
			p.storagePool = v
		case ParamDirectoryUID:
			p.ownership.UID, err = parseID(v)
		case ParamDirectoryGID:
			p.ownership.GID, err = parseID(v)
		case ParamDirectoryMode:
			p.ownership.Mode, err = parseMode(v)
		case contract.ParamOverlayCSI:
			// Whether a pool is shared comes from --datadir, so hpp only
			// checks that the value is a boolean.
			if _, err = strconv.ParseBool(v); err != nil {
				err = fmt.Errorf("%q must be \"true\" or \"false\"", v)
			}
		case paramPVCNamespace:
			p.claim.Namespace = v
		case paramPVCName:
			p.claim.Name = v
		default:
			if !hasIgnoredPrefix(k) {
				err = fmt.Errorf("unknown parameter (known: %s, %s, %s, %s, %s)",
					contract.ParamStoragePool, ParamDirectoryUID, ParamDirectoryGID, ParamDirectoryMode, contract.ParamOverlayCSI)
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("parameters.%s: %v", k, err))
		}
	}
	if len(problems) > 0 {
		return p, invalidArg("invalid StorageClass parameters: %s", strings.Join(problems, "; "))
	}
	return p, nil
}

func hasIgnoredPrefix(k string) bool {
	return slices.ContainsFunc(ignoredParamPrefixes, func(prefix string) bool { return strings.HasPrefix(k, prefix) })
}

func parseID(v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxID {
		return -1, fmt.Errorf("%q is not a numeric id between 0 and %d", v, maxID)
	}
	return int(n), nil
}

func parseMode(v string) (os.FileMode, error) {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o777 {
		return 0, fmt.Errorf("%q is not an octal permission mode between 0700 and 0777 (e.g. \"0770\")", v)
	}
	if n&0o700 != 0o700 {
		// Without rwx for the owner the driver itself could not clean up
		// the directory on delete; refusing is kinder than a stuck PV.
		return 0, fmt.Errorf("%q must give the owner rwx (0700)", v)
	}
	return os.FileMode(n), nil
}
