package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/test/chaos/probes"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

func mountIDs(paths []string) (map[string]int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return probes.MountIDs(f, paths)
}

// checkMounts: no pool unmounted or mounted again at any poll.
func (r *run) checkMounts() {
	now, err := mountIDs(keys(r.mountIDs))
	if err == nil {
		err = probes.CheckMounts(r.mountIDs, now)
	}
	if err != nil {
		r.violation("%v", err)
	}
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// levels reads hpp-csi's open files and goroutines once it has been idle
// for a moment.
func (r *run) levels(ctx context.Context) probes.Levels {
	node := r.env.C.RealNode()
	var lv probes.Levels
	err := kit.Poll(ctx, time.Minute, "hpp-csi's levels", func(ctx context.Context) (bool, string, error) {
		text, err := node.HPPCSIMetrics(ctx)
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		lv, err = probes.ReadLevels(node.Process("hpp-csi").Pid(), strings.NewReader(text))
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		return true, "", nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return lv
}

// settle waits, after the faults, until every claim in the namespace is
// Bound (by until) and every writer acknowledges records again.
func (r *run) settle(ctx context.Context, until time.Time) {
	c := r.env.C.Client
	r.readAcks(ctx)
	before := map[uint32]uint64{}
	for _, w := range r.writers {
		before[w.id] = w.acked
	}
	err := kit.Poll(ctx, max(time.Until(until), 30*time.Second), "every claim Bound and every writer writing", func(ctx context.Context) (bool, string, error) {
		claims, err := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		var pending []string
		for _, pvc := range claims.Items {
			if pvc.Status.Phase != corev1.ClaimBound && pvc.DeletionTimestamp == nil {
				pending = append(pending, pvc.Name)
			}
		}
		r.readAcks(ctx)
		var stuck []string
		for _, w := range r.writers {
			if w.acked <= before[w.id] {
				stuck = append(stuck, fmt.Sprintf("writer %d at record %d", w.id, w.acked))
			}
		}
		return len(pending) == 0 && len(stuck) == 0, fmt.Sprintf("claims not Bound %v, writers not writing %v", pending, stuck), nil
	})
	if err != nil {
		r.violation("%v", err)
	}
}

// checkAtEnd checks what must hold once the faults are over.
func (r *run) checkAtEnd(ctx context.Context) {
	r.checkWriters(ctx)
	r.checkMounts()
	r.checkDeleted(ctx)
	r.checkCapacity(ctx)
	if err := probes.CheckLevels(r.levelsBefore, r.levels(ctx), 20); err != nil {
		r.violation("%v", err)
	}
	r.checkMessages(ctx)
}

// checkDeleted: every deleted claim's volume leaves no directory and no
// project ID, and no pool keeps a staging or trash entry. The pools here
// enforce no sizes on a kernel without project quotas, so their ledgers
// are empty; make quota-vm-cluster checks the IDs where they exist
// (test/e2e's TestEnforcedClaimsUnderDriverKills).
func (r *run) checkDeleted(ctx context.Context) {
	var dirs, stores, volumes []string
	gone := map[string]uint32{}
	for _, d := range r.deleted {
		dirs = append(dirs, filepath.Join(r.poolPaths[d.pool], "csi", d.handle))
		gone[d.handle] = 0 // the ID it held is not known here: links only
	}
	for _, pool := range []string{kit.PoolLocal, kit.PoolShared, poolFull} {
		v := filepath.Join(r.poolPaths[pool], "csi")
		volumes = append(volumes, v)
		stores = append(stores, probes.StoreDirs(v)...)
	}
	err := kit.Poll(ctx, 2*time.Minute, "deleted volumes gone from their pools", func(context.Context) (bool, string, error) {
		// A violation keeps the poll going (deletes take a moment); its
		// text is the state the timeout reports.
		if left, err := probes.Split(probes.CheckLeftovers(dirs, stores)); left != "" || err != nil {
			return false, left, err
		}
		for _, v := range volumes {
			links, err := probes.QuotaLinks(v)
			if err != nil {
				return false, "", err
			}
			r.quotaLinks = max(r.quotaLinks, len(links))
			if held, err := probes.Split(probes.CheckQuotaReleased(links, gone, nil)); held != "" || err != nil {
				return false, held, err
			}
		}
		return true, "", nil
	})
	if err != nil {
		r.violation("%d deleted volumes: %v", len(r.deleted), err)
	}
}

// checkMessages: every warning a user saw names its cause.
func (r *run) checkMessages(ctx context.Context) {
	events, err := r.env.C.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.violation("listing events: %v", err)
		return
	}
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		if err := probes.CheckMessage(fmt.Sprintf("event %s on %s %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name), e.Message); err != nil {
			r.violation("%v", err)
		}
	}
}

// report prints the faults, the operations and the latencies.
func (r *run) report() {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report: seed %d, %v of faults\n", r.schedule.Seed, r.schedule.Length)
	b.WriteString(r.schedule.String())
	var ops []string
	for op := range r.ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	b.WriteString("operations (ok/failed):\n")
	for _, op := range ops {
		fmt.Fprintf(&b, "  %-18s %d/%d\n", op, r.ops[op].ok, r.ops[op].failed)
		for _, e := range r.ops[op].errs {
			fmt.Fprintf(&b, "    failed at %s\n", e)
		}
	}
	fmt.Fprintf(&b, "create-to-Bound without faults: %s\n", quantiles(r.baseline))
	fmt.Fprintf(&b, "create-to-Bound under chaos:    %s\n", quantiles(r.chaotic))
	for _, w := range r.writers {
		fmt.Fprintf(&b, "writer %d (pool %s): %d records acknowledged, all there\n", w.id, w.pool, w.acked)
	}
	fmt.Fprintf(&b, "deleted volumes checked: %d (project IDs in the pools' ledgers: %d; none where the kernel has no project quotas)\n", len(r.deleted), r.quotaLinks)
	r.t.Log(b.String())
}

func quantiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no claims"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("p50 %v, p99 %v (%d claims)", at(0.5).Truncate(10*time.Millisecond), at(0.99).Truncate(10*time.Millisecond), len(s))
}
