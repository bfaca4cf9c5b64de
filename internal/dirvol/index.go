package dirvol

import (
	"path/filepath"
	"sync"
)

// index keeps, in memory, what every volume of this Store requested and has
// used, so that the space reserved by volumes (requested but not written
// yet) is a sum kept up to date, not a read of every record on each
// capacity question. It is rebuilt by Recover from the records on disk and
// kept by Create and Delete; usage figures come from whoever measures
// volumes (NoteUsage). On a shared pool it knows only what this node made
// or found at start.
type index struct {
	mu       sync.Mutex
	vols     map[string]indexEntry
	reserved int64
}

type indexEntry struct {
	kind     string
	capacity int64
	used     int64 // -1 until measured: the whole request counts as reserved
}

func (e indexEntry) unwritten() int64 {
	if e.capacity <= 0 {
		return 0
	}
	if e.used < 0 {
		return e.capacity
	}
	return max(0, e.capacity-e.used)
}

func (x *index) init() { x.vols = map[string]indexEntry{} }

func (x *index) put(id string, capacity int64, kind string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, ok := x.vols[id]
	if ok {
		x.reserved -= old.unwritten()
	}
	e := indexEntry{kind: kind, capacity: capacity, used: -1}
	x.vols[id] = e
	x.reserved += e.unwritten()
}

func (x *index) remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.vols[id]; ok {
		x.reserved -= old.unwritten()
		delete(x.vols, id)
	}
}

// volumes returns what the index knows of every volume, as Volumes whose
// Path is where the directory should be.
func (x *index) volumes(root string) []Volume {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Volume, 0, len(x.vols))
	for id, e := range x.vols {
		out = append(out, Volume{ID: id, Path: filepath.Join(root, id), CapacityBytes: e.capacity, Kind: e.kind, HasMeta: true})
	}
	return out
}

func (x *index) noteUsage(id string, used int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.vols[id]
	if !ok {
		return
	}
	x.reserved -= e.unwritten()
	e.used = used
	x.vols[id] = e
	x.reserved += e.unwritten()
}

// Reserved returns what this Store's volumes requested but have not written
// yet, from their last measured usage (see NoteUsage); a volume never
// measured counts in full: being conservative only delays a placement,
// overcommitting fails a pod. It costs the same with 10,000 volumes as with
// none.
func (s *Store) Reserved() int64 {
	s.index.mu.Lock()
	defer s.index.mu.Unlock()
	return s.index.reserved
}

// NoteUsage records the bytes volume id was last measured to use, for
// Reserved. Unknown ids are ignored.
func (s *Store) NoteUsage(id string, usedBytes int64) { s.index.noteUsage(id, usedBytes) }
