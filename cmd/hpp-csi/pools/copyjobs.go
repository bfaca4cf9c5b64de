package pools

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// copyJobs are the copies from other nodes this process runs, by the new
// volume's id. A copy may take far longer than csi-provisioner waits for
// CreateVolume, so it runs detached from the request and each retry (same
// name) asks the registry. A job is in memory only: a restart forgets it,
// and the store's recovery removes its staging directory (the copy is a
// dirvol Fill, staged like any create).
//
// The volume's id lock (Lock) is held by the request that starts a job and
// by each retry, never by the job: a retry must be able to ask while the
// copy runs. DeleteVolume, holding the lock, cancels the job and waits for
// it to end before looking for the volume, so a publication in progress
// either completes before the delete looks or is undone by the cancel.
type copyJobs struct {
	mu   sync.Mutex
	jobs map[string]*copyJob
	// fills are the jobs filling a pool's clone cache with a source, which
	// other jobs of the same source wait for (cachefill.go).
	fills map[fillKey]*cacheFill
}

func newCopyJobs() *copyJobs {
	return &copyJobs{jobs: map[string]*copyJob{}, fills: map[fillKey]*cacheFill{}}
}

// copyJob is one copy from another node into a new volume.
type copyJob struct {
	id, key string
	pool    *poolState
	started time.Time
	cancel  context.CancelFunc
	// done is closed when the job has ended; err and ended are set
	// before.
	done     chan struct{}
	err      error
	ended    time.Time
	received atomic.Int64
	canceled atomic.Bool

	mu    sync.Mutex
	node  string
	total int64
	// filling is the volume whose copy of the source j waits for, to
	// fill the clone cache; "" when not waiting.
	filling string
	// endFill ends j's fill of the clone cache (cachefill.go), when j is
	// one; a no-op otherwise. Only the job's own goroutine calls it.
	endFill func(fillOutcome)
}

// waitFor records the volume whose cache fill j waits for ("": none).
func (j *copyJob) waitFor(volume string) {
	j.mu.Lock()
	j.filling = volume
	j.mu.Unlock()
}

// connected records the serving node and the transfer's size once the
// stream is there.
func (j *copyJob) connected(node string, total int64) {
	j.mu.Lock()
	j.node, j.total = node, total
	j.mu.Unlock()
}

func (j *copyJob) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// failedCopyTTL is how long a failed copy's error waits for a retry to
// collect it: a claim deleted meanwhile never retries.
const failedCopyTTL = time.Hour

// add registers j, which must not replace a job (the caller holds the id's
// lock and collected any earlier one), and drops failed jobs nobody asked
// about for failedCopyTTL.
func (c *copyJobs) add(j *copyJob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, old := range c.jobs {
		if old.finished() && time.Since(old.ended) > failedCopyTTL {
			delete(c.jobs, id)
		}
	}
	c.jobs[j.id] = j
}

func (c *copyJobs) get(id string) *copyJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[id]
}

// forget drops j if it is still id's job.
func (c *copyJobs) forget(j *copyJob) {
	c.mu.Lock()
	if c.jobs[j.id] == j {
		delete(c.jobs, j.id)
	}
	c.mu.Unlock()
}

// collect answers a create of id in pool p from key (a source's key, ""
// for none) while a copy into id is known: Busy with its progress while it
// runs, its error once it failed (forgotten then, so the next retry starts
// over), nil when there is none or it succeeded (the volume is in place).
func (c *copyJobs) collect(id string, p *poolState, key string) error {
	j := c.get(id)
	if j == nil {
		return nil
	}
	if !j.finished() {
		if j.pool != p || j.key != key {
			return refuse(Exists, "volume %q is being copied from %s into storage pool %q; this request asks for content source %q in storage pool %q",
				id, j.key, j.pool.name(), key, p.name())
		}
		return j.progress()
	}
	c.forget(j)
	if j.pool != p || j.key != key {
		// A failed copy of another request is no answer to this one.
		return nil
	}
	return j.err
}

// progress is the answer to a retry while the copy runs: Busy (Aborted, the
// CSI spec's "operation pending for volume"), with what a person watching
// the claim wants to know.
func (j *copyJob) progress() error {
	if j.canceled.Load() {
		return refuse(Busy, "volume %q: its copy from another node was canceled and is stopping; retry later", j.id)
	}
	j.mu.Lock()
	node, total, filling := j.node, j.total, j.filling
	j.mu.Unlock()
	took := time.Since(j.started)
	if filling != "" {
		return refuse(Busy, "volume %q: waiting for volume %q's copy of %s to fill this node's clone cache, then copying from it (for %s); operation pending, retry later",
			j.id, filling, j.key, took.Round(time.Second))
	}
	if node == "" {
		return refuse(Busy, "volume %q: asking the node that holds %s for it (for %s); operation pending, retry later",
			j.id, j.key, took.Round(time.Second))
	}
	got := j.received.Load()
	rate := int64(0)
	if s := took.Seconds(); s > 0 {
		rate = int64(float64(got) / s)
	}
	amount := humanBytes(got, got) + " received"
	if total > 0 {
		// The stream's headers count too: the last of it may pass the
		// data's size, which would read oddly.
		amount = humanBytes(min(got, total), total) + " of " + humanBytes(total, total)
	}
	return refuse(Busy, "volume %q: copying from node %s: %s at %s/s; operation pending, retry later",
		j.id, node, amount, humanBytes(rate, rate))
}

// humanBytes writes n in the binary unit that suits scale ("3.1 GiB"), so
// that two figures of one message share their unit.
func humanBytes(n, scale int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i, div := 0, int64(1)
	for i < len(units)-1 && scale >= div*1024 {
		i, div = i+1, div*1024
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(div), units[i])
}

// StopCopy cancels the copy into volume id, if one runs, and waits for it
// to end: its staging directory is removed and its quota released by then.
// DeleteVolume calls it holding the id's lock, before it looks for the
// volume. A copy that does not stop before ctx ends is Busy; it stays
// registered, so the next retry waits again.
func (rt *Runtime) StopCopy(ctx context.Context, id string) error {
	j := rt.copies.get(id)
	if j == nil {
		return nil
	}
	j.canceled.Store(true)
	j.cancel()
	select {
	case <-j.done:
	case <-ctx.Done():
		return refuse(Busy, "volume %q: its copy from another node was canceled and has not stopped yet; retry later", id)
	}
	rt.copies.forget(j)
	return nil
}
