package main

import (
	"context"
	"fmt"
	"time"
)

// roundBlock is how many runs of one series go back to back before the next
// series takes over.
const roundBlock = 50

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

// roundSeries is one timed series and what it measured so far.
type roundSeries struct {
	width int       // latencies the step returns
	step  roundStep // one run of the series
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
