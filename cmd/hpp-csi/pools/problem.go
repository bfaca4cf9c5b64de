package pools

import (
	"fmt"
	"sync"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// Reasons are CamelCase per the CSI spec; messages say what to do. The
// reasons of unreachable directories are in health.go.
const (
	ReasonPoolFull         = "PoolFull"
	ReasonPoolNoInodes     = "PoolOutOfInodes"
	ReasonVolumeDirMissing = "VolumeDirectoryMissing"
	ReasonTargetNotMounted = "TargetNotMounted"
)

// Problem is one adverse condition of a pool or a volume; unreachable ones
// make volumes INACCESSIBLE, the others DEGRADED.
type Problem struct {
	Unreachable bool
	// Reason is CamelCase, per the CSI spec; Message says what to do.
	Reason  string
	Message string
}

func spaceProblems(p *poolState, st capacity.Stats) []Problem {
	var out []Problem
	if st.AvailableBytes == 0 {
		out = append(out, Problem{Reason: ReasonPoolFull, Message: fmt.Sprintf("storage pool %q is full: 0 of %d bytes free; writes fail with ENOSPC", p.name(), st.TotalBytes)})
	} else if capacity.Offered(st, p.headroom) == 0 {
		out = append(out, Problem{Reason: ReasonPoolFull, Message: fmt.Sprintf("storage pool %q is inside its reserved headroom: %d bytes free, %d reserved; no new volume fits",
			p.name(), st.AvailableBytes, p.headroom.Reserved(st.TotalBytes))})
	}
	if st.TotalInodes > 0 && st.FreeInodes == 0 {
		out = append(out, Problem{Reason: ReasonPoolNoInodes, Message: fmt.Sprintf("storage pool %q has no free inodes (%d in use); creating files fails", p.name(), st.UsedInodes)})
	}
	return out
}

func missingDirProblem(p *poolState, v dirvol.Volume) Problem {
	return Problem{Unreachable: true, Reason: ReasonVolumeDirMissing, Message: fmt.Sprintf(
		"volume %q: its directory %s in storage pool %q is gone (removed outside hpp?); its data is lost", v.ID, v.Path, p.name())}
}

// identityMismatches are the volumes whose publish was refused for another
// pool identity. Memory only: kubelet retries the publish, which records
// it again after a restart.
type identityMismatches struct {
	mu   sync.Mutex
	byID map[string]Problem
}

func (m *identityMismatches) record(id string, pr Problem) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byID == nil {
		m.byID = map[string]Problem{}
	}
	m.byID[id] = pr
}

func (m *identityMismatches) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byID, id)
}

func (m *identityMismatches) get(id string) (Problem, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.byID[id]
	return pr, ok
}
