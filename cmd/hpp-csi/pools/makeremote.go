package pools

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// copyJoinWait bounds how long a CreateVolume waits for a copy from
// another node before it answers with the copy's progress. Half the
// request's deadline is the other bound: csi-provisioner's deadline (10s
// by default) travels with the call, and an answer after it is lost.
const copyJoinWait = 5 * time.Second

// makeRemote makes c's volume from a source this node does not hold: it
// starts a job that fetches the source from its node (remotecopy.go) and
// commits it as any create (copyjobs.go says how retries and deletes
// meet the job), and waits a little for it. The caller holds the id's
// lock, found no volume and no job, and reserved the room.
func (rt *Runtime) makeRemote(ctx context.Context, pl placement, c Creation, r room) (dirvol.Volume, bool, error) {
	// Committed marked: until a CreateVolume returns it, the volume is
	// one the sweep may remove (uncollected.go).
	c = rt.markUncollected(c)
	jobCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &copyJob{id: c.ID, key: pl.key, pool: pl.pool, started: time.Now(), cancel: cancel, done: make(chan struct{}),
		endFill: func(fillOutcome) {}}
	rt.copies.add(j)
	rt.log.Info("copying volume content from another node", zap.String("volume", c.ID), zap.String("source", j.key), zap.String("pool", pl.pool.name()))
	go rt.runCopy(jobCtx, j, pl, c, r)
	return rt.awaitCopy(ctx, j, pl.store)
}

// runCopy is the job: commit as any create, filled by fetching.
func (rt *Runtime) runCopy(ctx context.Context, j *copyJob, pl placement, c Creation, r room) {
	defer j.cancel()
	c.Spec.Fill = rt.remoteFill(ctx, j, *c.Source, c.Claim, c.Spec.CapacityBytes)
	vol, _, err := rt.commit(ctx, pl.pool, pl.store, c, r)
	result := "succeeded"
	switch {
	case err != nil && j.canceled.Load():
		result = "canceled"
	case err != nil:
		result = resultOf(KindOf(err))
		rt.log.Warn("copy from another node failed", zap.String("volume", j.id), zap.String("source", j.key), zap.Error(err))
	}
	rt.remoteResults.WithLabelValues(pl.pool.name(), result).Inc()
	if err == nil {
		// Before done is closed: a CreateVolume that collects the volume
		// then drops it from the set after this.
		rt.noteUncollected(vol)
	}
	j.err, j.ended = err, time.Now()
	close(j.done)
	if err == nil {
		// The volume is in place: the retry finds it, not the job.
		rt.copies.forget(j)
	}
}

// resultOf names a failed copy's Kind in the copies metric.
func resultOf(k Kind) string {
	switch k {
	case NotFound:
		return "not_found"
	case Unavailable:
		return "unavailable"
	case Denied:
		return "denied"
	case Invalid:
		return "invalid"
	case NoRoom, TooLarge:
		return "no_room"
	case Canceled:
		return "canceled"
	}
	return "failed"
}

// awaitCopy waits for j a little (copyJoinWait, or half of what is left of
// ctx), then answers as a retry would: the job's error, its progress, or
// the volume it made, for the caller to accept.
func (rt *Runtime) awaitCopy(ctx context.Context, j *copyJob, store *dirvol.Store) (dirvol.Volume, bool, error) {
	wait := copyJoinWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-j.done:
	case <-t.C:
	case <-ctx.Done():
	}
	if err := rt.copies.collect(j.id, j.pool, j.key); err != nil {
		return dirvol.Volume{}, false, err
	}
	vol, err := store.Get(ctx, j.id)
	if err != nil {
		return dirvol.Volume{}, false, wrap("looking up the copied volume", err)
	}
	return vol, false, nil
}
