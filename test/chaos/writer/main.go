// Command writer is the chaos tier's workload (issue 31): it appends
// numbered, checksummed records to a file on a Filesystem volume or to a
// Block volume's device, fsyncs each, and only then prints "ack N" on
// stdout. The harness collects the acks from the pod's log and checks
// after the run that every acknowledged record is still there
// (test/chaos/records.Verify). A failed write (the pool full, the volume
// gone for a moment) is printed and retried, never acknowledged.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hostpath-provisioner/hpp/test/chaos/records"
)

func main() {
	path := flag.String("path", "", "the file (created if missing) or block device to write records to")
	id := flag.Uint("writer", 1, "this writer's number, written into every record")
	every := flag.Duration("every", 100*time.Millisecond, "the pause between two records")
	capacity := flag.Int64("capacity", 0, "bytes of a block device to use (0: a file, sized by its records)")
	flag.Parse()
	if *path == "" {
		fmt.Fprintln(os.Stderr, "writer: --path is required")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	var w *records.Writer
	for {
		if w == nil {
			var err error
			if w, err = records.OpenWriter(*path, uint32(*id), *capacity); err != nil {
				// A broken history is the finding itself: say it and stop.
				fmt.Printf("error: opening %s: %v\n", *path, err)
				os.Exit(1)
			}
		}
		seq, err := w.Append(time.Now())
		if err != nil {
			fmt.Printf("error: %v\n", err)
			// Reopen: the next record is decided by what is on disk.
			_ = w.Close()
			w = nil
		} else {
			fmt.Printf("ack %d\n", seq)
		}
		select {
		case <-stop:
			return
		case <-time.After(*every):
		}
	}
}
