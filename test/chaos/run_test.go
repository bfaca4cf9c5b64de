package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/chaos/plan"
	"github.com/hostpath-provisioner/hpp/test/chaos/probes"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// run is one chaos run: the cluster, the workload's state and what the
// checks found. Violations are collected (t.Errorf) rather than stopping
// the run, so one run reports every broken invariant with its time.
type run struct {
	t        *testing.T
	env      *kit.Env
	binDir   string
	schedule plan.Plan
	start    time.Time
	// faultsStart is when the schedule began (zero before it does).
	faultsStart time.Time
	writers     []*writer
	mountIDs    map[string]int
	poolPaths   map[string]string
	quotaLinks  int // the most project ID links a pool held at the end's check

	mu       sync.Mutex
	ops      map[string]*opCount
	deleted  []deletedVolume
	timeline []string

	baseline, chaotic []time.Duration
	levelsBefore      probes.Levels
}

// opCount counts one kind of operation; errs says why each failure failed
// (with its time in the run), for the report: a failure under faults is
// allowed, but the report must say what it was.
type opCount struct {
	ok, failed int
	errs       []string
}

// deletedVolume is a claim the churn deleted: its volume must leave
// nothing in its pool.
type deletedVolume struct {
	claim, handle, pool string
}

func newRun(t *testing.T, env *kit.Env, binDir string, schedule plan.Plan) *run {
	return &run{t: t, env: env, binDir: binDir, schedule: schedule, start: time.Now(),
		ops: map[string]*opCount{}, poolPaths: env.Pools}
}

// note adds a line to the timeline printed around a violation.
func (r *run) note(format string, args ...any) {
	line := r.elapsed() + " " + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.timeline = append(r.timeline, line)
	r.mu.Unlock()
}

// elapsed is the time since the run's start, as the timeline and the
// report print it.
func (r *run) elapsed() string {
	return time.Since(r.start).Truncate(100 * time.Millisecond).String()
}

// violation fails the run and prints the timeline's last lines.
func (r *run) violation(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.note("VIOLATION %s", msg)
	r.mu.Lock()
	tail := r.timeline
	if len(tail) > 15 {
		tail = tail[len(tail)-15:]
	}
	r.mu.Unlock()
	r.t.Errorf("invariant broken (seed %d): %s\ntimeline before it:\n  %s", r.schedule.Seed, msg, strings.Join(tail, "\n  "))
}

func (r *run) count(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ops[op]
	if c == nil {
		c = &opCount{}
		r.ops[op] = c
	}
	if err != nil {
		c.failed++
		c.errs = append(c.errs, r.elapsed()+" "+err.Error())
	} else {
		c.ok++
	}
}

// watch polls the invariants that must hold at every moment (pool mounts,
// acknowledged records) until the returned stop is called.
func (r *run) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				r.checkMounts()
				r.checkWriters(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}
