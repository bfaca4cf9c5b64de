package dirvol

import "sync"

// idLocks serialises operations on one id within this process, so two
// concurrent Creates of the same id cannot overwrite each other's meta file
// between the existence check and the rename. Different ids never wait on
// each other.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	mu   sync.Mutex
	refs int
}

func (l *idLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*idLock)
	}
	e := l.m[id]
	if e == nil {
		e = &idLock{}
		l.m[id] = e
	}
	e.refs++
	l.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}
