package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// roundBlock is how many runs of one series go back to back before the next
// series takes over.
const roundBlock = 50

// createDeleteRounds measures CreateVolume+DeleteVolume on every pool and
// the reference series (see floor.go) in one phase per disk-backed pool. In
// a phase the pool's series, the tmpfs pool's and the two no-op calls take
// turns in blocks of roundBlock runs, each cycle starting at a different
// series, so that the pool and its baselines see the same minutes of this
// shared, noisy machine; measured one after another, a noisy minute would
// land on one of them and make the comparison meaningless. The disk-backed
// pools get a phase each because they share one disk: interleaved, one
// pool's background writeback would be charged to the other. The baselines
// run in every phase, their share of -ops in each. Each phase ends with its
// pool settled (see settle).
func (b *bench) createDeleteRounds(ctx context.Context) ([]series, error) {
	noop := &roundSeries{width: 1, step: b.noopStep(ctx), label: func(lat [][]time.Duration) []series {
		return []series{summarize("2 no-op calls", lat[0])}
	}}
	parts := []*roundSeries{noop}
	baselines := []*roundSeries{noop}
	var phases [][]*roundSeries
	var phasePools []string
	for _, pool := range []string{tmpfsPool, xfsPool, diskPool} {
		if _, ok := b.pools[pool]; !ok {
			continue
		}
		pair := &roundSeries{width: 3, step: b.createDeleteRound(ctx, pool), label: func(lat [][]time.Duration) []series {
			return b.pairSeries(pool, "create", "delete", lat)
		}}
		parts = append(parts, pair)
		if pool == tmpfsPool {
			baselines = append(baselines, pair)
			continue
		}
		step, done, err := b.durableRenameStep(pool)
		if err != nil {
			return nil, err
		}
		defer done()
		fsync := &roundSeries{width: 1, step: step, label: func(lat [][]time.Duration) []series {
			s := summarize("rename+fsync", lat[0])
			s.Pool, s.Filesystem = pool, fsName(b.pools[pool])
			return []series{s}
		}}
		parts = append(parts, fsync)
		phases = append(phases, []*roundSeries{pair, fsync})
		phasePools = append(phasePools, pool)
	}
	for _, p := range parts {
		if err := p.warmUp(); err != nil {
			return nil, err
		}
	}
	share := (b.o.ops + len(phases) - 1) / len(phases)
	for i, own := range phases {
		deadline := time.Now().Add(b.o.maxTime)
		quota := map[*roundSeries]int{}
		for _, p := range own {
			quota[p] = b.o.ops
		}
		for _, p := range baselines {
			quota[p] = min(len(p.lat[0])+share, b.o.ops)
		}
		members := append(append([]*roundSeries{}, baselines...), own...)
		if err := runPhase(ctx, members, quota, deadline); err != nil {
			return nil, err
		}
		if err := b.settle(ctx, phasePools[i]); err != nil {
			return nil, err
		}
	}
	var res []series
	for _, p := range parts {
		res = append(res, p.label(p.lat)...)
	}
	return res, nil
}

// runPhase lets members take turns, roundBlock runs at a time and each cycle
// starting one further, until each has quota runs in all or deadline passed.
func runPhase(ctx context.Context, members []*roundSeries, quota map[*roundSeries]int, deadline time.Time) error {
	for cycle := 0; time.Now().Before(deadline); cycle++ {
		ran := false
		for k := range members {
			p := members[(cycle+k)%len(members)]
			for n := 0; n < roundBlock && len(p.lat[0]) < quota[p]; n++ {
				if err := p.run(ctx); err != nil {
					return err
				}
				ran = true
			}
		}
		if !ran {
			return nil
		}
	}
	return nil
}

// roundSeries is one series of createDeleteRounds and what it measured so far.
type roundSeries struct {
	width int                                  // latencies the step returns
	step  roundStep                            // one run of the series
	label func(lat [][]time.Duration) []series // its series, from its latencies
	lat   [][]time.Duration
}

// warmUp runs the step warmup times unrecorded and readies the series to
// record.
func (r *roundSeries) warmUp() error {
	r.lat = make([][]time.Duration, r.width)
	for i := range warmup {
		if _, err := r.step(-1 - i); err != nil {
			return err
		}
	}
	return nil
}

func (r *roundSeries) run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := r.step(len(r.lat[0]))
	if err != nil {
		return err
	}
	if len(d) != r.width {
		return fmt.Errorf("bench step returned %d latencies, want %d", len(d), r.width)
	}
	for w, x := range d {
		r.lat[w] = append(r.lat[w], x)
	}
	return nil
}

// settle waits until the pool has purged every deleted volume and then
// flushes its filesystem, so that the next phase does not pay for this
// one's background writes on the disk they share.
func (b *bench) settle(ctx context.Context, pool string) error {
	trash := filepath.Join(b.pools[pool], csitest.VolumesSubdir, csitest.TrashDir)
	for start := time.Now(); ; {
		entries, err := os.ReadDir(trash)
		if err != nil {
			return fmt.Errorf("settle %s pool: %w", pool, err)
		}
		if len(entries) == 0 {
			break
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("settle %s pool: %d entries still in %s after a minute", pool, len(entries), trash)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	fd, err := unix.Open(b.pools[pool], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("settle %s pool: %w", pool, err)
	}
	defer unix.Close(fd) //nolint:errcheck // read-only descriptor
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("settle %s pool: syncfs: %w", pool, err)
	}
	return nil
}
