package driver

import (
	"sync"
)

// volumeLocks serialises operations per volume id. A second call for an id
// that is busy is refused with Aborted instead of queued: the CO retries with
// backoff, and a queue of identical calls behind a slow one only piles up.
type volumeLocks struct {
	mu   sync.Mutex
	busy map[string]struct{}
}

func newVolumeLocks() *volumeLocks {
	return &volumeLocks{busy: make(map[string]struct{})}
}

// acquire returns a release func, or an Aborted error when id is busy.
func (l *volumeLocks) acquire(id string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, taken := l.busy[id]; taken {
		return nil, aborted("an operation on volume %q is already in progress; retry later", id)
	}
	l.busy[id] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.busy, id)
		l.mu.Unlock()
	}, nil
}
