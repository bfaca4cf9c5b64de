package dirvol

import "sync"

// groupSync makes changes in one directory durable, sharing each fsync
// between the callers that need it (group commit).
//
// A caller has already made its change (a rename) when it calls sync. A
// sync that started before that may not cover it, so the caller joins the
// next batch: the batch that has not started yet. The first caller of a
// batch that finds no sync running runs it; callers that arrive meanwhile
// gather in the following batch and wait. A lone caller therefore pays
// exactly one fsync, and n concurrent callers pay about two between them,
// however large n is. Every caller gets the error of the fsync that covered
// its change, never another batch's.
type groupSync struct {
	fsync func() error

	mu      sync.Mutex
	running *syncBatch // the fsync in flight, nil when none
	next    *syncBatch // the batch that waits for it, nil when none
}

type syncBatch struct {
	started bool // under groupSync.mu: a member leads it, nobody else may
	done    chan struct{}
	err     error
}

func newGroupSync(fsync func() error) *groupSync { return &groupSync{fsync: fsync} }

func (g *groupSync) sync() error {
	g.mu.Lock()
	if g.next == nil {
		g.next = &syncBatch{done: make(chan struct{})}
	}
	b := g.next
	for !b.started && g.running != nil {
		// An fsync is in flight that began before our change: wait for
		// it, then lead our batch unless another member already does.
		prev := g.running
		g.mu.Unlock()
		<-prev.done
		g.mu.Lock()
	}
	if b.started {
		g.mu.Unlock()
		<-b.done
		return b.err
	}
	// b is still g.next: a batch leaves next only when it starts.
	b.started = true
	g.running, g.next = b, nil
	g.mu.Unlock()

	b.err = g.fsync()

	g.mu.Lock()
	g.running = nil
	g.mu.Unlock()
	close(b.done)
	return b.err
}
