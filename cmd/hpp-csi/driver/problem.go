package driver

import (
	"fmt"
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Reasons are CamelCase per the CSI spec; messages say what to do. The
// reasons of unreachable directories are in root_health.go.
const (
	reasonPoolFull         = "PoolFull"
	reasonPoolNoInodes     = "PoolOutOfInodes"
	reasonVolumeDirMissing = "VolumeDirectoryMissing"
	reasonTargetNotMounted = "TargetNotMounted"
)

// problem is one adverse condition; unreachable ones make volumes
// INACCESSIBLE, the others DEGRADED.
type problem struct {
	unreachable bool
	reason      string
	message     string
}

func spaceProblems(p *poolState, st capacity.Stats) []problem {
	var out []problem
	if st.AvailableBytes == 0 {
		out = append(out, problem{reason: reasonPoolFull, message: fmt.Sprintf("storage pool %q is full: 0 of %d bytes free; writes fail with ENOSPC", p.name(), st.TotalBytes)})
	} else if capacity.Offered(st, p.headroom) == 0 {
		out = append(out, problem{reason: reasonPoolFull, message: fmt.Sprintf("storage pool %q is inside its reserved headroom: %d bytes free, %d reserved; no new volume fits",
			p.name(), st.AvailableBytes, p.headroom.Reserved(st.TotalBytes))})
	}
	if st.TotalInodes > 0 && st.FreeInodes == 0 {
		out = append(out, problem{reason: reasonPoolNoInodes, message: fmt.Sprintf("storage pool %q has no free inodes (%d in use); creating files fails", p.name(), st.UsedInodes)})
	}
	return out
}

func missingDirProblem(p *poolState, v dirvol.Volume) problem {
	return problem{unreachable: true, reason: reasonVolumeDirMissing, message: fmt.Sprintf(
		"volume %q: its directory %s in storage pool %q is gone (removed outside hpp?); its data is lost", v.ID, v.Path, p.name())}
}

// identityMismatches are the volumes whose publish was refused for another
// pool identity. Memory only: kubelet retries the publish, which records
// it again after a restart.
type identityMismatches struct {
	mu   sync.Mutex
	byID map[string]problem
}

func (m *identityMismatches) record(id string, pr problem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID == nil {
		m.byID = map[string]problem{}
	}
	m.byID[id] = pr
}

func (m *identityMismatches) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byID, id)
}

func (m *identityMismatches) get(id string) (problem, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.byID[id]
	return pr, ok
}
