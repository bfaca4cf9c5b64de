// Package pool holds the storage pool configuration (the driver's --datadir)
// and the one function that turns a volume id into a directory inside a pool
// and nowhere else.
package pool

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

const (
	// MaxNameLen bounds pool names; they end up in StorageClass parameters,
	// labels and log lines.
	MaxNameLen = 50
	// MaxPathLen bounds pool paths so that <path>/<id> stays well inside
	// PATH_MAX.
	MaxPathLen = 255
	// MaxIDLen is NAME_MAX: an id is one directory entry.
	MaxIDLen = 255
	// SnapshotProviderReflink is the one snapshot provider the KubeVirt
	// driver defines.
	SnapshotProviderReflink = "reflink"
)

// Pool is one entry of the --datadir JSON array, with the KubeVirt driver's
// fields and meaning: Path is the directory that directly holds the volumes
// (deployments mount the host's pool directory and pass <mount>/csi).
type Pool struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// SnapshotPath and SnapshotProvider are the KubeVirt driver's snapshot
	// settings: a pool takes snapshots when SnapshotProvider is set, and
	// keeps them in SnapshotPath (default: <path>/.hpp-snapshots). A
	// SnapshotPath directly inside Path is set aside, never a volume.
	SnapshotPath     string `json:"snapshotPath,omitempty"`
	SnapshotProvider string `json:"snapshotProvider,omitempty"`
	// Shared marks a pool on storage that every node mounts (NFS and the
	// like): its volumes get no node topology and any node may publish them.
	Shared bool `json:"shared,omitempty"`
	// ReservedBytes and ReservedPercent are ours (not in the KubeVirt
	// format): headroom never offered to volumes; the larger of the two
	// applies.
	ReservedBytes   int64   `json:"reservedBytes,omitempty"`
	ReservedPercent float64 `json:"reservedPercent,omitempty"`
	// LegacyPath is ours too: the legacy provisioner's PV_DIR, whose
	// volumes hpp-migrate turned into CSI volumes of this pool in place
	// (see legacy.go). Empty: the pool has none.
	LegacyPath string `json:"legacyPath,omitempty"`
	// Mounted is ours: the pool is storage that hpp-mounter mounts at Path
	// (the operator sets it for pvcTemplate pools). hpp-csi then uses the
	// pool only while hpp-mounter's marker (internal/poolmarker) is there,
	// so volumes never land in the bare mount point on the OS disk.
	Mounted bool `json:"mounted,omitempty"`
	// EnforceSize is ours: every volume of the pool gets a project quota
	// of its own (a project ID inherited by all it holds, and a hard block
	// limit equal to its capacity), so a volume cannot grow past its size
	// and offered capacity counts every volume's full size. The pool's
	// filesystem must be XFS mounted with prjquota, or ext4 with the
	// features project and quota mounted with prjquota; on any other the
	// pool is not ready, with a message naming what to add. Off (the
	// default) is the KubeVirt driver's behaviour: sizes are recorded,
	// not enforced.
	EnforceSize bool `json:"enforceSize,omitempty"`
	// ProjectIDs is ours: the project IDs hpp may give this pool's
	// volumes, so that it never takes one another user of project quotas
	// on the same filesystem uses (IDs that already carry usage or limits
	// are skipped too). Zero: DefaultProjectIDs. Only with EnforceSize;
	// enforcing pools on one filesystem need ranges that do not overlap.
	ProjectIDs IDRange `json:"projectIDs,omitzero"`
	// CacheBytes is ours: the most the pool's clone cache (copies of
	// sources fetched from other nodes, kept in <path>/.hpp-cache so that
	// later clones of the same unchanged source are local) may hold.
	// Zero: DefaultCachePercent of the pool's filesystem.
	CacheBytes int64 `json:"cacheBytes,omitempty"`
}

// DefaultCachePercent is the clone cache's limit, in percent of the pool's
// filesystem size, for a pool that sets no cacheBytes.
const DefaultCachePercent = 10

// CacheLimit is the pool's clone cache limit for a filesystem of
// totalBytes: CacheBytes, or DefaultCachePercent of totalBytes.
func (p Pool) CacheLimit(totalBytes int64) int64 {
	if p.CacheBytes > 0 {
		return p.CacheBytes
	}
	return totalBytes / 100 * DefaultCachePercent
}

// IDRange is an inclusive range of project IDs, {"first":N,"last":M}.
type IDRange struct {
	First uint32 `json:"first"`
	Last  uint32 `json:"last"`
}

// DefaultProjectIDs is the project ID range of an enforcing pool that sets
// none: a million IDs, well away from the small numbers admins pick by
// hand in /etc/projid.
var DefaultProjectIDs = IDRange{First: 4_000_000, Last: 4_999_999}

// MaxProjectID is the largest project ID hpp gives: XFS and ext4 store 32
// bits, and 2^32-1 is (uint32)-1, which tools read as "none".
const MaxProjectID = 1<<32 - 2

// ProjectIDRange is the pool's effective project ID range.
func (p Pool) ProjectIDRange() IDRange {
	if p.ProjectIDs == (IDRange{}) {
		return DefaultProjectIDs
	}
	return p.ProjectIDs
}

// Size returns how many IDs the range holds.
func (r IDRange) Size() uint64 { return uint64(r.Last) - uint64(r.First) + 1 }

// Contains reports whether id is in the range.
func (r IDRange) Contains(id uint32) bool { return id >= r.First && id <= r.Last }

// Overlaps reports whether the two ranges share an ID.
func (r IDRange) Overlaps(o IDRange) bool { return r.First <= o.Last && o.First <= r.Last }

// VolumePath is the directory of CSI volume id in this pool, <path>/<id>;
// see ResolveIn.
func (p Pool) VolumePath(id string) (string, error) {
	return ResolveIn(p.Path, id)
}

// Set is a validated, immutable list of pools.
type Set struct {
	pools  []Pool
	byName map[string]int
}

// NewSet validates pools exactly as Parse does and returns every problem.
// The Set keeps the paths cleaned (see fieldrule.CheckPoolPath).
func NewSet(pools []Pool) (*Set, error) {
	pools = append([]Pool(nil), pools...)
	if err := validatePools(pools); err != nil {
		return nil, err
	}
	s := &Set{pools: pools, byName: make(map[string]int, len(pools))}
	for i, p := range s.pools {
		s.byName[p.Name] = i
	}
	return s, nil
}

// All returns the pools in config order; the slice is a copy.
func (s *Set) All() []Pool {
	if s == nil {
		return nil
	}
	return append([]Pool(nil), s.pools...)
}

// Get returns the pool called name.
func (s *Set) Get(name string) (Pool, bool) {
	if s == nil {
		return Pool{}, false
	}
	i, ok := s.byName[name]
	if !ok {
		return Pool{}, false
	}
	return s.pools[i], true
}

// Select picks the pool for a StorageClass's storagePool parameter. An empty
// parameter means the "legacy" pool, or the only pool, so that StorageClasses
// written for the KubeVirt driver keep working.
func (s *Set) Select(storagePool string) (Pool, error) {
	const field = "parameters." + contract.ParamStoragePool
	if storagePool == "" {
		if p, ok := s.Get(contract.DefaultPool); ok {
			return p, nil
		}
		if s != nil && len(s.pools) == 1 {
			return s.pools[0], nil
		}
		return Pool{}, fieldErr(field, "is not set, and with %s and no pool named %q the StorageClass must set "+contract.ParamStoragePool+" to one of: %s",
			s.countPools(), contract.DefaultPool, s.names())
	}
	if p, ok := s.Get(storagePool); ok {
		return p, nil
	}
	return Pool{}, fieldErr(field, "%q is not a pool on this node; available pools: %s", storagePool, s.names())
}

func (s *Set) countPools() string {
	n := 0
	if s != nil {
		n = len(s.pools)
	}
	if n == 1 {
		return "1 pool"
	}
	return fmt.Sprintf("%d pools", n)
}

// names lists the pool names sorted, quoted, for error messages.
func (s *Set) names() string {
	if s == nil || len(s.pools) == 0 {
		return "(none configured)"
	}
	names := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		names = append(names, fmt.Sprintf("%q", p.Name))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
