package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func printTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "hpp-csi benchmark over the real unix socket (%d CPUs, kernel %s, %s; load average %s at start, %s at end)\n\n",
		r.Host.CPUs, r.Host.Kernel, r.Host.GoVersion, r.Host.LoadAvgStart, r.Host.LoadAvgEnd)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tpool\tfs\tcount\tper second\tp50 ms\tp99 ms\tmax ms\t")
	rows := append(append([]series{}, r.CreateDelete...), r.PublishUnpublish...)
	rows = append(rows, r.VolumeStats.Cached)
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t\n", s.Name, s.Pool, s.Filesystem, s.Count, s.PerSecond, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	_ = tw.Flush()
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
