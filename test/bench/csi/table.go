package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func printTable(w io.Writer, r *result) {
	steal := "unknown"
	if r.Host.StealPercent >= 0 {
		steal = fmt.Sprintf("%.2f%%", r.Host.StealPercent)
	}
	fmt.Fprintf(w, "hpp-csi benchmark over the real unix socket (%d CPUs, kernel %s, %s; load average %s at start, %s at end; CPU steal %s during the run)\n\n",
		r.Host.CPUs, r.Host.Kernel, r.Host.GoVersion, r.Host.LoadAvgStart, r.Host.LoadAvgEnd, steal)
	for _, p := range r.Durability {
		fmt.Fprintf(w, "durable create+delete on the %s pool (%s): hpp-csi beside the baseline build (mkdir + RemoveAll, no fsync, as upstream), same gRPC path, taking turns\n", p.Pool, p.Filesystem)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "callers\thpp calls/s\tbaseline calls/s\tratio\thpp pair p50 ms\thpp pair p99 ms\tbaseline pair p50 ms\t")
		for _, row := range p.Rows {
			fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2fx\t%.3f\t%.3f\t%.3f\t\n", row.Callers, row.HPPPerSecond, row.BaselinePerSecond, row.Ratio,
				row.HPPPair.P50Ms, row.HPPPair.P99Ms, row.BaselinePair.P50Ms)
		}
		fmt.Fprintf(tw, "disk: dir rename+fsync\tp50 %.3f ms\tp99 %.3f ms\t(%d samples)\t\t\t\t\n", p.DirFsync.P50Ms, p.DirFsync.P99Ms, p.DirFsync.Count)
		_ = tw.Flush()
		fmt.Fprintf(w, "single caller target: pair p50 <= 2 x %.3f + 0.3 = %.3f ms\n\n", p.DirFsync.P50Ms, p.TargetPairMs)
	}
	if r.Capacity.Volumes > 0 {
		printOthers(w, r)
	}
	fmt.Fprintln(w, "targets (reported, not asserted):")
	for _, t := range r.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		cmp := "<="
		if t.AtLeast {
			cmp = ">="
		}
		fmt.Fprintf(w, "  %-75s %s %g %s: measured %.3f %s (%s)\n", t.What, cmp, t.Limit, t.Unit, t.Measured, t.Unit, verdict)
	}
	fmt.Fprintln(w)
}

// printOthers prints what a full run measures beyond durability.
func printOthers(w io.Writer, r *result) {
	c := r.Capacity
	fmt.Fprintf(w, "--reservation-aware-capacity, tmpfs pools, empty vs %d volumes (filled in %.1f s; driver RSS then %.1f MiB):\n", c.Volumes, c.FilledInSeconds, c.RSSMiB)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tpool\tfs\tcount\tper second\tp50 ms\tp99 ms\tmax ms\t")
	rows := []series{c.EmptyGetCapacity, c.FullGetCapacity, c.EmptyCreate, c.FullCreate}
	rows = append(rows, r.PublishUnpublish...)
	rows = append(rows, r.VolumeStats.Cached)
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t\n", s.Name, s.Pool, s.Filesystem, s.Count, s.PerSecond, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nNodeGetVolumeStats on %d files in %d directories: first call (walk) %.1f ms, reported %d inodes\n",
		r.VolumeStats.Files, r.VolumeStats.Directories, r.VolumeStats.FirstCallMs, r.VolumeStats.InodesSeen)
	m := r.IdleRSS
	fmt.Fprintf(w, "idle RSS (anonymous + file-backed) of hpp-csi: no volumes %s; %d volumes after creating them %s (peak %.1f MiB); after a restart and ListVolumes of all %d: %s\n\n",
		m.NoVolumes, m.Volumes, m.AfterCreating, m.AfterCreating.PeakMiB, m.ListedAfterRestart, m.AfterRestart)
}

func (m memory) String() string {
	return fmt.Sprintf("%.1f MiB (%.1f + %.1f)", m.RSSMiB, m.AnonMiB, m.FileMiB)
}
