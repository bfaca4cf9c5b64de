package pools

import (
	"sync"
)

// volumeLocks serialises operations per volume id. A second call for an id
// that is busy is refused with Busy instead of queued: the CO retries with
// backoff, and a queue of identical calls behind a slow one only piles up.
type volumeLocks struct {
	mu   sync.Mutex
	busy map[string]struct{}
}

func newVolumeLocks() *volumeLocks {
	return &volumeLocks{busy: make(map[string]struct{})}
}

// acquire returns a release func, or a Busy error when id is busy.
func (l *volumeLocks) acquire(id string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, taken := l.busy[id]; taken {
		return nil, refuse(Busy, "an operation on volume %q is already in progress; retry later", id)
	}
	l.busy[id] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.busy, id)
		l.mu.Unlock()
	}, nil
}

// Lock keeps other operations off volume id until the returned release is
// called; an id that is busy is refused (Busy).
func (rt *Runtime) Lock(id string) (release func(), err error) { return rt.locks.acquire(id) }

// LockSnapshot is Lock for snapshot id.
func (rt *Runtime) LockSnapshot(id string) (release func(), err error) {
	return rt.locks.acquire(snapLockKey(id))
}

// snapLockKey keeps snapshot ids apart from volume ids in the lock map:
// '/' never appears in an id.
func snapLockKey(id string) string { return "snapshot/" + id }

// lockSource is Lock or LockSnapshot, as src is a volume or a snapshot.
func (rt *Runtime) lockSource(src Source) (release func(), err error) {
	if src.Snapshot {
		return rt.LockSnapshot(src.ID)
	}
	return rt.Lock(src.ID)
}
