package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// progress returns a bar on a terminal and one plain line per PV otherwise
// (logs, CI), both on stderr so stdout carries only the summary.
func (env *environment) progress(what string) migrate.Progress {
	if env.terminal {
		return &barProgress{w: env.stderr, what: what}
	}
	return &lineProgress{w: env.stderr, what: what}
}

type barProgress struct {
	w    io.Writer
	what string
	bar  *progressbar.ProgressBar
}

func (b *barProgress) Start(total int) {
	b.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription(b.what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)
}

func (b *barProgress) Done(r migrate.Result) {
	if r.Outcome == migrate.OutcomeFailed {
		// Failures stay visible above the bar.
		_ = b.bar.Clear()
		fmt.Fprintf(b.w, "failed: PV %s: %s\n", r.PV, r.Reason)
	}
	_ = b.bar.Add(1)
}

func (b *barProgress) Finish() { _ = b.bar.Finish() }

type lineProgress struct {
	w     io.Writer
	what  string
	total int
	done  int
}

func (l *lineProgress) Start(total int) {
	l.total = total
	fmt.Fprintf(l.w, "%s %d PVs\n", l.what, total)
}

func (l *lineProgress) Done(r migrate.Result) {
	l.done++
	line := fmt.Sprintf("[%d/%d] %s %s", l.done, l.total, r.Outcome, r.PV)
	if r.Reason != "" {
		line += ": " + r.Reason
	}
	fmt.Fprintln(l.w, line)
}

func (l *lineProgress) Finish() {}
