package csinode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/hostpath-provisioner/hpp/internal/grpctest"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// manyFiles makes n empty files in dir.
func manyFiles(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		fd, err := unix.Open(filepath.Join(dir, "f"+strconv.Itoa(i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = unix.Close(fd)
	}
}

// holdsOpen reports whether process pid has a file descriptor on dir: the
// driver's usage walk keeps the directory it reads open.
func holdsOpen(pid int, dir string) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && link == dir {
			return true
		}
	}
	return false
}

// SIGTERM while a call is being served: the call completes with its real
// answer, the process exits 0, and the socket file is gone.
func TestGracefulStopFinishesInFlightCalls(t *testing.T) {
	const files = 100_000
	e := newEnv(t, csitest.Tmpfs(t, 512*MiB, 0), "--stats-cache-ttl", "0s")
	vol := e.create("pvc-busy", 0, nil)
	manyFiles(t, e.volDir("pvc-busy"), files)
	target := filepath.Join(t.TempDir(), "mount")
	e.publish(csitest.PublishRequest(vol.GetVolumeId(), target, vol.GetVolumeContext()))
	defer func() { _ = unix.Unmount(target, unix.MNT_DETACH) }()

	type result struct {
		resp *csi.NodeGetVolumeStatsResponse
		err  error
	}
	pid := e.d.Pid()
	var inFlight chan result
	// No timing: send SIGTERM only once the driver is seen walking the
	// volume (its directory open), retrying a call that finished first.
	for attempt := 0; attempt < 50 && inFlight == nil; attempt++ {
		done := make(chan result, 1)
		go func() {
			resp, err := e.c.NodeGetVolumeStats(context.WithoutCancel(ctx(t)), &csi.NodeGetVolumeStatsRequest{VolumeId: "pvc-busy", VolumePath: target})
			done <- result{resp, err}
		}()
	watch:
		for {
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatalf("NodeGetVolumeStats: %v", r.err)
				}
				break watch
			default:
			}
			if holdsOpen(pid, e.volDir("pvc-busy")) {
				if err := e.d.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				inFlight = done
				break watch
			}
		}
	}
	if inFlight == nil {
		t.Fatal("never saw a NodeGetVolumeStats call in flight in 50 attempts")
	}
	r := <-inFlight
	if r.err != nil {
		t.Fatalf("in-flight NodeGetVolumeStats after SIGTERM: %v; want it to finish", r.err)
	}
	if got := usage(t, r.resp, csi.VolumeUsage_INODES).GetUsed(); got != files+1 {
		t.Errorf("in-flight call answered %d inodes; want %d (a complete walk)", got, files+1)
	}
	wctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := e.d.Wait(wctx); err != nil {
		t.Errorf("driver exit after SIGTERM: %v; want exit status 0", err)
	}
	mustNotExist(t, e.d.Socket)
	if !strings.Contains(e.d.Log(), "stopping CSI server; waiting for in-flight calls") {
		t.Errorf("the driver did not log a graceful stop")
	}
}

func TestHealthzAndMetrics(t *testing.T) {
	fsDir, poolPath := bindPool(t)
	e := newEnv(t, poolPath, "--health-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0")
	if code, body := httpGet(t, e.d, "health", "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q; want 200 ok", code, body)
	}
	e.create("pvc-metrics", MiB, nil)
	_, err := e.c.CreateVolume(ctx(t), csitest.CreateRequest("pvc-bad", "node-b", MiB, csitest.PoolParams(poolName)))
	grpctest.WantCode(t, err, codes.InvalidArgument)

	code, body := httpGet(t, e.d, "metrics", "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	m := parseMetrics(t, body)
	var st unix.Statfs_t
	if err := unix.Statfs(fsDir, &st); err != nil {
		t.Fatal(err)
	}
	pool := `{pool="` + poolName + `"}`
	wantMetric(t, m, "hpp_pool_capacity_bytes"+pool, float64(int64(st.Blocks)*st.Frsize))
	wantMetric(t, m, "hpp_pool_shares_os_filesystem"+pool, 0)
	wantMetric(t, m, "hpp_pool_healthy"+pool, 1)
	for _, name := range []string{"hpp_pool_used_bytes", "hpp_pool_available_bytes", "hpp_pool_free_bytes"} {
		if _, ok := m[name+pool]; !ok {
			t.Errorf("/metrics lacks %s%s", name, pool)
		}
	}
	wantMetric(t, m, `hpp_csi_operations_total{code="OK",method="CreateVolume"}`, 1)
	wantMetric(t, m, `hpp_csi_operations_total{code="InvalidArgument",method="CreateVolume"}`, 1)
	wantMetric(t, m, `hpp_csi_operation_duration_seconds_count{code="OK",method="CreateVolume"}`, 1)

	// The pool's mount disappears: unhealthy, and /healthz says why.
	if err := unix.Unmount(poolPath, 0); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, e.d, "health", "/healthz"); code != 503 || !strings.Contains(body, poolName) || !strings.Contains(body, "mount disappeared") {
		t.Errorf("/healthz with the pool's mount gone = %d %q; want 503 naming the pool and the lost mount", code, body)
	}
	_, body = httpGet(t, e.d, "metrics", "/metrics")
	wantMetric(t, parseMetrics(t, body), "hpp_pool_healthy"+pool, 0)
}

// parseMetrics maps `name{labels}` (as exposed, labels sorted) to its value.
func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func wantMetric(t *testing.T, m map[string]float64, key string, want float64) {
	t.Helper()
	got, ok := m[key]
	if !ok {
		t.Errorf("/metrics lacks %s", key)
		return
	}
	if got != want {
		t.Errorf("%s = %v; want %v", key, got, want)
	}
}
