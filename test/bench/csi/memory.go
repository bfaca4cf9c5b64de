package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// memory is one reading of the driver's /proc/<pid>/status, in MiB. RSS
// splits into anonymous memory (Go heap, stacks, runtime: what the driver
// allocates) and file-backed pages (the executable's code and read-only
// data that the process has touched: shared, reclaimable, and set by which
// packages the binary links and initialises). The split says where a
// change to the RSS has to come from.
type memory struct {
	RSSMiB  float64 `json:"rssMiB"`
	AnonMiB float64 `json:"anonMiB"`
	FileMiB float64 `json:"fileMiB"`
	PeakMiB float64 `json:"peakMiB"`
}

type rssResult struct {
	Volumes            int    `json:"volumes"`
	NoVolumes          memory `json:"noVolumes"`
	AfterCreating      memory `json:"afterCreating"`
	AfterRestart       memory `json:"afterRestartAndList"`
	ListedAfterRestart int    `json:"listedAfterRestart"`
}

// worst is the RSS the target is checked against.
func (r rssResult) worst() float64 { return max(r.AfterCreating.RSSMiB, r.AfterRestart.RSSMiB) }

// idleRSS lets the driver sit idle, then reads its memory from /proc.
func (b *bench) idleRSS(ctx context.Context) (memory, error) {
	select {
	case <-ctx.Done():
		return memory{}, ctx.Err()
	case <-time.After(b.o.idleWait):
	}
	return procMemory(b.d.Pid())
}

func (b *bench) rssWithVolumes(ctx context.Context, r rssResult) (rssResult, error) {
	r.Volumes = b.o.volumes
	for i := range b.o.volumes {
		name := fmt.Sprintf("bench-rss-%04d", i)
		if _, err := b.c.CreateVolume(ctx, createReq(name, tmpfsPool, 1<<20)); err != nil {
			return r, fmt.Errorf("CreateVolume %s: %w", name, err)
		}
	}
	var err error
	if r.AfterCreating, err = b.idleRSS(ctx); err != nil {
		return r, err
	}
	// A fresh process finding the volumes on disk, after kubelet-like
	// calls that touch them all.
	if err := b.d.Stop(); err != nil {
		return r, fmt.Errorf("stopping hpp-csi: %w", err)
	}
	if err := b.d.Restart(); err != nil {
		return r, err
	}
	token := ""
	for {
		resp, err := b.c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 100, StartingToken: token})
		if err != nil {
			return r, fmt.Errorf("ListVolumes: %w", err)
		}
		r.ListedAfterRestart += len(resp.GetEntries())
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if r.ListedAfterRestart < b.o.volumes {
		log := b.d.Log()
		return r, fmt.Errorf("ListVolumes after restart listed %d volumes; %d exist; driver log tail:\n%s", r.ListedAfterRestart, b.o.volumes, log[max(0, len(log)-4000):])
	}
	for _, pool := range []string{diskPool, tmpfsPool} {
		if _, err := b.c.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: csitest.PoolParams(pool), AccessibleTopology: csitest.Segment(nodeID)}); err != nil {
			return r, fmt.Errorf("GetCapacity: %w", err)
		}
	}
	r.AfterRestart, err = b.idleRSS(ctx)
	return r, err
}

// procMemory reads VmRSS, RssAnon, RssFile and VmHWM of pid.
func procMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	fields := map[string]*float64{"VmRSS:": &m.RSSMiB, "RssAnon:": &m.AnonMiB, "RssFile:": &m.FileMiB, "VmHWM:": &m.PeakMiB}
	for _, line := range strings.Split(string(data), "\n") {
		key, rest, ok := strings.Cut(line, "\t")
		dst := fields[key]
		if !ok || dst == nil {
			continue
		}
		var kib float64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kib); err == nil {
			*dst = round(kib / 1024)
		}
	}
	if m.RSSMiB == 0 {
		return memory{}, errors.New("no VmRSS in /proc/" + fmt.Sprint(pid) + "/status")
	}
	return m, nil
}
