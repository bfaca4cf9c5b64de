package migrate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Outcome of one PV in a run.
type Outcome string

const (
	OutcomeMigrated Outcome = "Migrated"
	OutcomeRestored Outcome = "RolledBack"
	OutcomeDone     Outcome = "AlreadyDone"
	OutcomeSkipped  Outcome = "Skipped"
	OutcomeFailed   Outcome = "Failed"
)

// Result of one PV.
type Result struct {
	PV      string  `json:"pv"`
	Claim   string  `json:"claim,omitempty"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
}

// Progress is told about each finished PV; a bar on a terminal, a line
// otherwise.
type Progress interface {
	Start(total int)
	Done(r Result)
	Finish()
}

// Runner runs a plan (or a rollback) over many PVs at once.
type Runner struct {
	Engine   *Engine
	Backups  Backups
	Parallel int
	Progress Progress
}

// Failed tells whether any result is a failure.
func Failed(results []Result) bool {
	for _, r := range results {
		if r.Outcome == OutcomeFailed {
			return true
		}
	}
	return false
}

// Migrate migrates every Ready and Interrupted item of plan; Blocked ones
// are reported as skipped with their reasons.
func (r *Runner) Migrate(ctx context.Context, plan *Plan) []Result {
	names := make([]string, len(plan.Items))
	for i, it := range plan.Items {
		names[i] = it.PV
	}
	return r.each(ctx, names, func(i int) Result {
		it := plan.Items[i]
		res := Result{PV: it.PV, Claim: it.Claim}
		switch it.State {
		case StateMigrated:
			res.Outcome = OutcomeDone
			return res
		case StateBlocked:
			res.Outcome, res.Reason = OutcomeSkipped, strings.Join(it.Reasons, "; ")
			return res
		}
		if err := r.migrateOne(ctx, it); err != nil {
			res.Outcome, res.Reason = OutcomeFailed, err.Error()
			return res
		}
		res.Outcome = OutcomeMigrated
		return res
	})
}

func (r *Runner) migrateOne(ctx context.Context, it Item) error {
	// The backup first: nothing is written to the cluster before the
	// original is safe on disk.
	if _, err := r.Backups.Ensure(it.Original); err != nil {
		return err
	}
	r.Engine.after(it.PV, StepBackup)
	handle := it.Want.Spec.CSI.VolumeHandle
	return r.Engine.Replace(ctx, Replacement{
		Original: it.Original,
		Want:     it.Want,
		Live:     it.Live,
		IsWant: func(pv *corev1.PersistentVolume) bool {
			return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName && pv.Spec.CSI.VolumeHandle == handle
		},
	})
}

// RollbackReplacement is the replacement that puts a backed-up PV back.
func RollbackReplacement(backup *corev1.PersistentVolume) Replacement {
	path := backup.Spec.HostPath.Path
	return Replacement{
		Original: backup,
		Want:     Restore(backup),
		IsWant: func(pv *corev1.PersistentVolume) bool {
			return pv.Spec.HostPath != nil && pv.Spec.HostPath.Path == path
		},
	}
}

// Rollback puts the backed-up PVs named back in place of their CSI PVs.
func (r *Runner) Rollback(ctx context.Context, names []string) []Result {
	return r.each(ctx, names, func(i int) Result {
		res := Result{PV: names[i]}
		backup, err := r.Backups.Load(names[i])
		if err == nil && backup == nil {
			err = fmt.Errorf("no backup of PV %s in %s", names[i], r.Backups.Dir)
		}
		if err == nil {
			if ref := backup.Spec.ClaimRef; ref != nil {
				res.Claim = ref.Namespace + "/" + ref.Name
			}
			var done bool
			if done, err = r.rollbackOne(ctx, backup); done {
				res.Outcome = OutcomeDone
			}
		}
		if err != nil {
			res.Outcome, res.Reason = OutcomeFailed, err.Error()
			return res
		}
		if res.Outcome == "" {
			res.Outcome = OutcomeRestored
		}
		return res
	})
}

// rollbackOne reports done when the legacy PV was already back (nothing
// but the final confirmation to do).
func (r *Runner) rollbackOne(ctx context.Context, backup *corev1.PersistentVolume) (done bool, err error) {
	if !IsLegacy(backup) {
		return false, fmt.Errorf("backup of PV %s: %w", backup.Name, ErrNotLegacy)
	}
	rep := RollbackReplacement(backup)
	live, err := r.Engine.get(ctx, backup.Name)
	if err != nil {
		return false, err
	}
	done = live != nil && rep.IsWant(live) && live.DeletionTimestamp == nil &&
		!slices.Contains(live.Finalizers, contract.FinalizerMigration) &&
		live.Spec.PersistentVolumeReclaimPolicy == backup.Spec.PersistentVolumeReclaimPolicy
	// Only a PV this tool made from that very backup is replaced: a CSI PV
	// of the same name made otherwise is someone else's volume.
	ours := live != nil && IsMigrated(live) && live.Annotations[contract.AnnMigratedFromUID] == string(backup.UID)
	if live != nil && !rep.IsWant(live) && !ours {
		return false, fmt.Errorf("PV %s is not the CSI PV hpp-migrate made from this backup (uid %s): left alone", backup.Name, backup.UID)
	}
	rep.Live = live
	return done, r.Engine.Replace(ctx, rep)
}

func (r *Runner) each(ctx context.Context, names []string, do func(int) Result) []Result {
	n := len(names)
	results := make([]Result, n)
	par := r.Parallel
	if par < 1 {
		par = 1
	}
	if r.Progress != nil {
		r.Progress.Start(n)
		defer r.Progress.Finish()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res := do(i)
				results[i] = res
				if r.Progress != nil {
					mu.Lock()
					r.Progress.Done(res)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range results {
		if results[i].Outcome == "" {
			results[i] = Result{PV: names[i], Outcome: OutcomeFailed, Reason: fmt.Sprintf("not started: %v", context.Cause(ctx))}
		}
	}
	return results
}
