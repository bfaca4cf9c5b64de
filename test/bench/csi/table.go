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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tpool\tfs\tcount\tper second\tp50 ms\tp99 ms\tmax ms\t")
	rows := append(append([]series{}, r.CreateDelete...), r.PublishUnpublish...)
	rows = append(rows, r.VolumeStats.Cached)
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t\n", s.Name, s.Pool, s.Filesystem, s.Count, s.PerSecond, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	_ = tw.Flush()
	printStorageShare(w, r.CreateDelete)
	fmt.Fprintf(w, "\nNodeGetVolumeStats on %d files in %d directories: first call (walk) %.1f ms, reported %d inodes\n",
		r.VolumeStats.Files, r.VolumeStats.Directories, r.VolumeStats.FirstCallMs, r.VolumeStats.InodesSeen)
	fmt.Fprintf(w, "idle RSS: no volumes %.1f MiB; %d volumes after creating them %.1f MiB (peak %.1f MiB); after a restart and ListVolumes of all %d: %.1f MiB\n\n",
		r.IdleRSS.NoVolumesMiB, r.IdleRSS.Volumes, r.IdleRSS.AfterCreatingMiB, r.IdleRSS.PeakMiB, r.IdleRSS.ListedAfterRestart, r.IdleRSS.AfterRestartMiB)
	fmt.Fprintln(w, "targets (reported, not asserted):")
	for _, t := range r.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  %-50s < %g %s: measured %.3f %s (%s)\n", t.What, t.Limit, t.Unit, t.Measured, t.Unit, verdict)
	}
	fmt.Fprintln(w)
}

// printStorageShare says, per disk-backed pool, how much of a create+delete
// the pool's filesystem added over tmpfs, in units of its own rename+fsync:
// on a journaling filesystem hpp-csi pays two such steps per pair (one
// journal commit for a create, one for a delete), so a figure near two means
// the rest is the filesystem.
func printStorageShare(w io.Writer, rows []series) {
	find := func(name, pool string) (series, bool) {
		for _, s := range rows {
			if s.Name == name && s.Pool == pool {
				return s, true
			}
		}
		return series{}, false
	}
	base, ok := find("create+delete", tmpfsPool)
	if !ok {
		return
	}
	for _, pool := range []string{xfsPool, diskPool} {
		pair, okPair := find("create+delete", pool)
		step, okStep := find("rename+fsync", pool)
		if !okPair || !okStep || step.P50Ms <= 0 {
			continue
		}
		extra := pair.P50Ms - base.P50Ms
		fmt.Fprintf(w, "\n%s: create+delete p50 %.3f ms = tmpfs %.3f ms + %.3f ms of storage = %.1f x its rename+fsync p50 (%.3f ms)",
			pool, pair.P50Ms, base.P50Ms, extra, extra/step.P50Ms, step.P50Ms)
	}
	fmt.Fprintln(w)
}
