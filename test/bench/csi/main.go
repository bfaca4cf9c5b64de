// Command csi benchmarks hpp-csi over its real unix socket: durable
// CreateVolume + DeleteVolume at 1, 4 and 8 concurrent callers beside a
// baseline build doing what the upstream driver does (no fsync), on the
// same disk; GetCapacity and CreateVolume with 10,000 volumes against an
// empty pool (reservation-aware capacity); NodePublish + NodeUnpublish;
// NodeGetVolumeStats on a volume with 100,000 files (first call and
// cached); and the driver's idle RSS with 1,000 volumes. It prints a table and then one JSON document
// to stdout. It needs root (bind mounts, tmpfs); without root it says so and
// exits 0, like a skipped test.
//
//	cd test && go run ./bench/csi [-ops 1000] [-max-time 20s] ...
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the benchmark's knobs; the defaults keep a run well under
// three minutes on a 2-core machine.
type options struct {
	ops             int
	publishOps      int
	files           int
	statsCalls      int
	volumes         int
	capacityVolumes int
	maxTime         time.Duration
	idleWait        time.Duration
	workDir         string
	jsonOut         string
	// durableOnly stops after the durable create+delete comparison: the
	// quick loop while working on the write path.
	durableOnly bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench-csi", flag.ContinueOnError)
	fs.IntVar(&o.ops, "ops", 600, "CreateVolume+DeleteVolume pairs per driver and number of callers on each disk-backed pool, and GetCapacity/CreateVolume calls per pool in the capacity comparison")
	fs.IntVar(&o.publishOps, "publish-ops", 1000, "NodePublish+NodeUnpublish round trips (stops earlier at -max-time)")
	fs.IntVar(&o.files, "files", 100_000, "files in the volume NodeGetVolumeStats measures")
	fs.IntVar(&o.statsCalls, "stats-calls", 1000, "cached NodeGetVolumeStats calls")
	fs.IntVar(&o.volumes, "volumes", 1000, "volumes present while the idle RSS is read")
	fs.IntVar(&o.capacityVolumes, "capacity-volumes", 10_000, "volumes in the full pool of the capacity comparison")
	fs.DurationVar(&o.maxTime, "max-time", 60*time.Second, "time bound of each disk-backed pool's create+delete comparison and of the publish round trips")
	fs.DurationVar(&o.idleWait, "idle-wait", 3*time.Second, "how long the driver sits idle before its RSS is read")
	fs.StringVar(&o.workDir, "workdir", os.TempDir(), "where the disk pool, socket and targets go (its filesystem is the \"disk\" pool)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the JSON result to this file")
	fs.BoolVar(&o.durableOnly, "durable-only", false, "run only the durable create+delete comparison (and the idle RSS with no volumes)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	for name, v := range map[string]int{"-ops": o.ops, "-publish-ops": o.publishOps, "-files": o.files, "-stats-calls": o.statsCalls, "-volumes": o.volumes, "-capacity-volumes": o.capacityVolumes} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %d must be positive", name, v))
		}
	}
	if o.maxTime <= 0 || o.idleWait < 0 {
		errs = append(errs, fmt.Errorf("-max-time %v must be positive and -idle-wait %v not negative", o.maxTime, o.idleWait))
	}
	return o, errors.Join(errs...)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi:", err)
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Printf("skipping the hpp-csi benchmark: it needs root for bind mounts and tmpfs (running as uid %d)\n", os.Geteuid())
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, res)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the command line has "&&"
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bench-csi:", err)
		os.Exit(1)
	}
	fmt.Print(out.String())
	if o.jsonOut != "" {
		if err := os.WriteFile(o.jsonOut, out.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-csi:", err)
			os.Exit(1)
		}
	}
}
