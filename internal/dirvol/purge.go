package dirvol

import (
	"errors"
	"io/fs"
	"sync"
	"time"

	"go.uber.org/zap"
)

// trashEntry is what one Delete left in trash: the volume's data and, when
// it had one, its record ("" when not).
type trashEntry struct {
	id, dir, record string
}

// purgeQueue empties trash entries after Delete returned, one at a time and
// in order. One at a time because freeing a large volume is heavy I/O (and
// on a filesystem mounted with -o discard every freed extent is a
// synchronous discard): deleting a hundred VM disks at once must not start a
// hundred concurrent removals competing with new CreateVolume calls. The
// worker goroutine exists only while there is work, so an idle Store holds
// none. A crash loses the queue, not the entries: Recover empties trash.
type purgeQueue struct {
	mu      sync.Mutex
	pending []trashEntry
	running bool
	remove  func(trashEntry) error
	log     *zap.Logger
}

// slowPurge is when a finished purge is worth an info line.
const slowPurge = time.Second

func (q *purgeQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

func (q *purgeQueue) add(e trashEntry) {
	q.mu.Lock()
	q.pending = append(q.pending, e)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

func (q *purgeQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.pending = nil
			q.mu.Unlock()
			return
		}
		e := q.pending[0]
		q.pending = q.pending[1:]
		q.mu.Unlock()
		start := time.Now()
		if err := q.remove(e); err != nil {
			q.log.Error("purging deleted volume failed; the next start retries", zap.String("id", e.id), zap.String("trash", e.dir), zap.Error(err))
			continue
		}
		// A large volume takes a while to free: say when its space is back.
		took := time.Since(start)
		level := zap.DebugLevel
		if took >= slowPurge {
			level = zap.InfoLevel
		}
		q.log.Log(level, "deleted volume purged", zap.String("id", e.id), zap.Duration("took", took), zap.Int("queued", q.queued()))
	}
}

// removeTrash removes one trash entry.
func (s *Store) removeTrash(e trashEntry) error {
	if err := s.fs.RemoveAll(e.dir); err != nil {
		return err
	}
	if e.record == "" {
		return nil
	}
	if err := s.fs.Remove(e.record); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
