package prjquota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// StateDir holds a pool's project ID links. Its name starts with '.', which
// pool.ValidateID refuses, so it is never a volume.
const StateDir = ".hpp-quota"

// ErrNoIDs is returned (wrapped) when every ID of the range is taken.
var ErrNoIDs = errors.New("no free project ID")

// Options configure a Ledger.
type Options struct {
	// Root is the pool's volumes directory.
	Root    string
	Range   pool.IDRange
	Backend Backend
	Logger  *zap.Logger
	// Step, when set, hears the name of each step of create, expand and
	// delete once it is done; a crash test kills the process there.
	Step func(name string)
}

// Ledger is one pool's project IDs: which volume holds which, and the
// limits set for them.
type Ledger struct {
	opts  Options
	dir   string
	log   *zap.Logger
	mu    sync.Mutex
	byID  map[uint32]string
	byVol map[string]holding
	next  uint32
}

type holding struct {
	id    uint32
	limit int64
}

// Open checks that the filesystem of opts.Root enforces project quotas (an
// error says what to change) and reads the pool's links. Call Recover next,
// before handing out IDs.
func Open(opts Options) (*Ledger, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Step == nil {
		opts.Step = func(string) {}
	}
	if err := Check(opts.Backend, opts.Root); err != nil {
		return nil, err
	}
	l := &Ledger{opts: opts, dir: filepath.Join(opts.Root, StateDir), log: opts.Logger,
		byID: map[uint32]string{}, byVol: map[string]holding{}, next: opts.Range.First}
	if err := os.Mkdir(l.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("project ID links: %w", err)
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("project ID links: %w", err)
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || e.Type() != fs.ModeSymlink {
			l.log.Warn("foreign entry in the project ID directory left alone", zap.String("path", filepath.Join(l.dir, e.Name())))
			continue
		}
		vol, err := os.Readlink(filepath.Join(l.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("project ID links: %w", err)
		}
		l.byID[uint32(id)] = vol
	}
	return l, nil
}

// Lookup finds a volume for Recover: its directory and recorded capacity,
// ok false when it does not exist.
type Lookup func(ctx context.Context, volumeID string) (dir string, capacity int64, ok bool, err error)

// RecoverReport counts what Recover did.
type RecoverReport struct {
	Held, Released, Relabelled, Relimited int
}

// Recover finishes what a crash left: every link whose volume exists gets
// its ID on the volume and a limit equal to the volume's capacity; the
// others are released (limit cleared, link removed).
func (l *Ledger) Recover(ctx context.Context, lookup Lookup) (RecoverReport, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var r RecoverReport
	ids := make([]uint32, 0, len(l.byID))
	for id := range l.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		vol := l.byID[id]
		dir, capacity, ok, err := lookup(ctx, vol)
		if err != nil {
			return r, fmt.Errorf("project %d of volume %q: %w", id, vol, err)
		}
		if ok && capacity > 0 {
			if other, dup := l.byVol[vol]; dup {
				// Two links for one volume: the one on the directory wins.
				if cur, _, perr := l.opts.Backend.Project(dir); perr == nil && cur == id {
					if err := l.releaseLocked(other.id); err != nil {
						return r, err
					}
					r.Released++
				} else {
					if err := l.releaseLocked(id); err != nil {
						return r, err
					}
					r.Released++
					continue
				}
			}
			relabelled, relimited, err := l.settle(dir, id, capacity)
			if err != nil {
				return r, fmt.Errorf("project %d of volume %q: %w", id, vol, err)
			}
			l.byVol[vol] = holding{id: id, limit: capacity}
			r.Held++
			r.Relabelled += relabelled
			r.Relimited += relimited
			continue
		}
		if err := l.releaseLocked(id); err != nil {
			return r, err
		}
		r.Released++
	}
	return r, nil
}

// settle makes dir carry id (the whole tree, when the directory itself
// does not: an adoption cut short) and the limit equal capacity.
func (l *Ledger) settle(dir string, id uint32, capacity int64) (relabelled, relimited int, err error) {
	cur, inherit, err := l.opts.Backend.Project(dir)
	if err != nil {
		return 0, 0, err
	}
	if cur != id || !inherit {
		if err := l.applyTree(dir, id); err != nil {
			return 0, 0, err
		}
		relabelled = 1
	}
	q, err := l.opts.Backend.Quota(l.opts.Root, id)
	if err != nil {
		return relabelled, 0, err
	}
	if q.HardBytes != roundLimit(capacity) {
		if err := l.opts.Backend.SetLimit(l.opts.Root, id, roundLimit(capacity)); err != nil {
			return relabelled, 0, err
		}
		relimited = 1
	}
	return relabelled, relimited, nil
}

// roundLimit is the limit set for a capacity: whole 4 KiB blocks, the
// block size of both filesystems, so that what is read back matches.
func roundLimit(capacity int64) int64 { return (capacity + 4095) &^ 4095 }

func (l *Ledger) path(id uint32) string {
	return filepath.Join(l.dir, strconv.FormatUint(uint64(id), 10))
}

// Assign gives volumeID a project ID with a hard limit of capacity bytes
// (the one it holds already, on a retry) and returns it; the caller then
// sets it on the staged directory (Apply) before the volume is published.
func (l *Ledger) Assign(volumeID string, capacity int64) (uint32, error) {
	if capacity <= 0 {
		return 0, fmt.Errorf("volume %q has no size to enforce", volumeID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.byVol[volumeID]; ok {
		if h.limit != capacity {
			if err := l.setLimitLocked(volumeID, h.id, capacity); err != nil {
				return 0, err
			}
		}
		return h.id, nil
	}
	id, err := l.allocateLocked(volumeID)
	if err != nil {
		return 0, err
	}
	l.opts.Step("assign.linked")
	if err := l.setLimitLocked(volumeID, id, capacity); err != nil {
		if rerr := l.releaseLocked(id); rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		return 0, err
	}
	l.opts.Step("assign.limited")
	return id, nil
}

func (l *Ledger) allocateLocked(volumeID string) (uint32, error) {
	r := l.opts.Range
	for range r.Size() {
		id := l.next
		if l.next == r.Last || !r.Contains(l.next) {
			l.next = r.First
		} else {
			l.next++
		}
		if _, held := l.byID[id]; held {
			continue
		}
		q, err := l.opts.Backend.Quota(l.opts.Root, id)
		if err != nil {
			return 0, err
		}
		if q.inUse() {
			// Blocks still charged (a deleted volume's trash not purged
			// yet) or another user's project: not free.
			continue
		}
		err = os.Symlink(volumeID, l.path(id))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("recording project %d for volume %q: %w", id, volumeID, err)
		}
		l.byID[id] = volumeID
		return id, nil
	}
	return 0, fmt.Errorf("%w: all %d project IDs of the pool's range %d-%d are held or in use on the filesystem; widen projectIDs in --datadir",
		ErrNoIDs, r.Size(), r.First, r.Last)
}

func (l *Ledger) setLimitLocked(volumeID string, id uint32, capacity int64) error {
	if err := l.opts.Backend.SetLimit(l.opts.Root, id, roundLimit(capacity)); err != nil {
		return err
	}
	l.byVol[volumeID] = holding{id: id, limit: capacity}
	return nil
}

// Apply gives the (staged, still empty or about to be filled) volume
// directory its project ID and the inherit flag.
func (l *Ledger) Apply(dir string, id uint32) error {
	if err := l.opts.Backend.SetProject(dir, id); err != nil {
		return err
	}
	l.opts.Step("apply")
	return nil
}

// Adopt enforces a directory that has no project ID yet (made by the
// replaced driver, or before the pool enforced): everything inside gets
// the ID first, the directory itself last, so Recover can tell a cut
// short adoption and finish it.
func (l *Ledger) Adopt(ctx context.Context, dir, volumeID string, capacity int64) (uint32, error) {
	id, err := l.Assign(volumeID, capacity)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := l.applyTree(dir, id); err != nil {
		return 0, err
	}
	l.opts.Step("adopt.tree")
	return id, nil
}

func (l *Ledger) applyTree(dir string, id uint32) error {
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		return l.opts.Backend.SetProject(p, id)
	})
	if err != nil {
		return fmt.Errorf("setting project %d inside %s: %w", id, dir, err)
	}
	return l.opts.Backend.SetProject(dir, id)
}

// Grow raises a held volume's limit to capacity; shrinking is the
// caller's to refuse.
func (l *Ledger) Grow(volumeID string, capacity int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.byVol[volumeID]
	if !ok {
		return fmt.Errorf("volume %q holds no project ID", volumeID)
	}
	if err := l.setLimitLocked(volumeID, h.id, capacity); err != nil {
		return err
	}
	l.opts.Step("grow.limited")
	return nil
}

// Release gives up volumeID's project ID once its directory is gone (in
// the trash): the limit is cleared, then the link removed. The ID is
// handed out again only once the trash's blocks are purged (allocation
// skips IDs with usage).
func (l *Ledger) Release(volumeID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.byVol[volumeID]
	if !ok {
		return nil
	}
	return l.releaseLocked(h.id)
}

func (l *Ledger) releaseLocked(id uint32) error {
	if err := l.opts.Backend.SetLimit(l.opts.Root, id, 0); err != nil {
		return err
	}
	l.opts.Step("release.unlimited")
	if err := os.Remove(l.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("releasing project %d: %w", id, err)
	}
	if vol, ok := l.byID[id]; ok {
		if h, held := l.byVol[vol]; held && h.id == id {
			delete(l.byVol, vol)
		}
		delete(l.byID, id)
	}
	l.opts.Step("release.unlinked")
	return nil
}

// Held returns the project ID and limit of volumeID, ok false when it has
// none (not enforced).
func (l *Ledger) Held(volumeID string) (id uint32, limit int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.byVol[volumeID]
	return h.id, h.limit, ok
}

// Usage is the kernel's accounting of volumeID's project.
func (l *Ledger) Usage(volumeID string) (Quota, bool, error) {
	id, _, ok := l.Held(volumeID)
	if !ok {
		return Quota{}, false, nil
	}
	q, err := l.opts.Backend.Quota(l.opts.Root, id)
	return q, err == nil, err
}

// Committed is what the pool's enforced volumes may still write: the sum
// over them of limit minus usage. Offered capacity subtracts it from the
// filesystem's free space, so every volume's full limit is counted and the
// scheduler never overcommits the pool.
func (l *Ledger) Committed() (int64, error) {
	l.mu.Lock()
	held := make([]holding, 0, len(l.byVol))
	for _, h := range l.byVol {
		held = append(held, h)
	}
	l.mu.Unlock()
	var sum int64
	for _, h := range held {
		q, err := l.opts.Backend.Quota(l.opts.Root, h.id)
		if err != nil {
			return 0, err
		}
		sum += max(0, roundLimit(h.limit)-q.UsedBytes)
	}
	return sum, nil
}

// Range is the range new IDs come from.
func (l *Ledger) Range() pool.IDRange { return l.opts.Range }

// Lift undoes enforcement on a pool that no longer asks for it: every
// linked ID's limit is cleared and its link removed, so that volumes grow
// past their old limits once expanded. It returns how many it lifted; a
// pool that never enforced has no links and costs one stat.
func Lift(root string, b Backend) (int, error) {
	dir := filepath.Join(root, StateDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || e.Type() != fs.ModeSymlink {
			continue
		}
		if err := b.SetLimit(root, uint32(id), 0); err != nil {
			return n, err
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
