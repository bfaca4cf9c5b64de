package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// tarPipe times GNU tar copying src into dst through a pipe, sparse files
// and xattrs kept, and dst made durable (syncfs), as a copy from another
// node is before its volume is published; then removes dst.
func tarPipe(ctx context.Context, src, dst string) (float64, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dst) }()
	script := `tar -C "$1" --sparse --xattrs -cf - . | tar -C "$2" --xattrs -xf - && sync -f "$2"`
	start := time.Now()
	out, err := exec.CommandContext(ctx, "sh", "-c", script, "tar-pipe", src, dst).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("tar baseline: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return took.Seconds(), nil
}

// counters are the figures read from both nodes' hpp-csi before and after.
type counters struct {
	sent, served, notModified float64 // the golden node's peer server
	received, hits, misses    float64 // the real node's pool runtime
}

func readCounters(ctx context.Context, real, golden *cluster.Node) (counters, error) {
	var c counters
	for _, m := range []struct {
		n    *cluster.Node
		name string
		to   *float64
	}{
		{golden, "hpp_peer_sent_bytes_total", &c.sent},
		{golden, `hpp_peer_requests_total{result="served"}`, &c.served},
		{golden, `hpp_peer_requests_total{result="not_modified"}`, &c.notModified},
		{real, "hpp_pool_remote_copy_received_bytes_total", &c.received},
		{real, "hpp_pool_clone_cache_hits_total", &c.hits},
		{real, "hpp_pool_clone_cache_misses_total", &c.misses},
	} {
		v, err := metric(ctx, m.n, m.name)
		if err != nil {
			return c, err
		}
		*m.to = v
	}
	return c, nil
}

// metric is kit.MetricSum, or one series when name carries its labels.
func metric(ctx context.Context, n *cluster.Node, name string) (float64, error) {
	if !strings.Contains(name, "{") {
		return kit.MetricSum(ctx, n, name)
	}
	text, err := n.HPPCSIMetrics(ctx)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+" ") {
			var v float64
			if _, err := fmt.Sscan(strings.TrimPrefix(l, name+" "), &v); err != nil {
				return 0, fmt.Errorf("metric line %q: %w", l, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("node %s: no metric %s", n.Name, name)
}

// copyLog is one of hpp-csi's "volume content copied from another node"
// lines: one transfer.
type copyLog struct {
	Volume      string  `json:"volume"`
	DataBytes   int64   `json:"dataBytes"`
	StreamBytes int64   `json:"streamBytes"`
	Took        float64 `json:"took"` // seconds (zap's production duration encoding)
}

// readCopyLogs reads the transfers logged in path after offset, and counts
// the clones filled from the cache.
func readCopyLogs(path string, offset int64) (copyLogs, error) {
	var out copyLogs
	f, err := os.Open(path)
	if err != nil {
		return out, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return out, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, `"msg":"volume content copied from another node"`):
			var c copyLog
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				return out, fmt.Errorf("hpp-csi log line %q: %w", line, err)
			}
			out.transfers = append(out.transfers, c)
		case strings.Contains(line, `"msg":"volume content copied from the clone cache"`):
			out.fromCache++
		case strings.Contains(line, `"msg":"csi call refused"`) && strings.Contains(line, `"method":"CreateVolume"`):
			// Each is a retry csi-provisioner schedules with its backoff.
			switch {
			case strings.Contains(line, "is already in progress"):
				out.busySource++
			case strings.Contains(line, "to fill this node's clone cache"):
				out.waitingFill++
			case strings.Contains(line, "operation pending"):
				out.pending++
			default:
				out.otherRefusals++
			}
		}
	}
	return out, sc.Err()
}

type copyLogs struct {
	transfers []copyLog
	fromCache int
	// CreateVolume answers other than success: the source's lock taken by
	// another create, waiting for the cache fill, copying, anything else.
	busySource, waitingFill, pending, otherRefusals int
}
