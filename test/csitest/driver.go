// Package csitest runs the real hpp-csi binary for tests and benchmarks:
// built from the workspace (or taken from $HPP_CSI_BIN), serving on a real
// unix socket, with its log kept for the failing test.
package csitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Pool is one storage pool. Path is the host pool directory; the driver is
// given <Path>/csi (VolumesSubdir) as the pool's path, as a deployment
// passes it, so a volume lands at <Path>/csi/<id>.
type Pool struct {
	Name            string
	Path            string
	Shared          bool
	ReservedBytes   int64
	ReservedPercent float64
	// LegacyPath is passed as it is (the legacy provisioner's PV_DIR,
	// usually Path itself, the parent of the volumes directory).
	LegacyPath string
	// Mounted pools need hpp-mounter's marker (internal/poolmarker).
	Mounted bool
	// SnapshotPath (absolute, as given) and SnapshotProvider are passed
	// unchanged.
	SnapshotPath     string
	SnapshotProvider string
	// EnforceSize and ProjectIDs ({"first","last"}) are passed unchanged.
	EnforceSize bool
	ProjectIDs  map[string]uint32
}

// Datadir is the --datadir JSON for pools, written as internal/pool's
// Pool (the one type of the format): each path is <Path>/csi.
func Datadir(pools []Pool) (string, error) {
	entries := make([]pool.Pool, len(pools))
	for i, p := range pools {
		entries[i] = pool.Pool{Name: p.Name, Path: filepath.Join(p.Path, VolumesSubdir), Shared: p.Shared,
			ReservedBytes: p.ReservedBytes, ReservedPercent: p.ReservedPercent, LegacyPath: p.LegacyPath, Mounted: p.Mounted,
			SnapshotPath: p.SnapshotPath, SnapshotProvider: p.SnapshotProvider, EnforceSize: p.EnforceSize,
			ProjectIDs: pool.IDRange{First: p.ProjectIDs["first"], Last: p.ProjectIDs["last"]}}
	}
	data, err := json.Marshal(entries)
	return string(data), err
}

// startTimeout bounds how long a driver may take to serve its socket.
const startTimeout = 30 * time.Second

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error

	killOnce sync.Once
	killPath string
	killErr  error

	baselineOnce sync.Once
	baselinePath string
	baselineErr  error
)

// BuildBinary returns the hpp-csi binary, building it once per process.
//
// The build goes to a temporary name next to a fixed path in the user's
// cache directory and is renamed over it: parallel test processes share one
// file instead of leaking a copy each, and a driver already running from
// the old file keeps its inode.
func BuildBinary() (string, error) {
	if p := os.Getenv("HPP_CSI_BIN"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() { buildPath, buildErr = build("hpp-csi", "hpp-csi") })
	return buildPath, buildErr
}

// BuildBaselineBinary returns hpp-csi built with the tag hpp_baseline: the
// same driver and gRPC path, with volumes made and removed as the KubeVirt
// driver does (mkdir, RemoveAll; no record, no fsync). Only benchmarks use
// it, as the upstream figure to compare durable creates with.
func BuildBaselineBinary() (string, error) {
	baselineOnce.Do(func() { baselinePath, baselineErr = build("hpp-csi", "hpp-csi-baseline", "-tags", "hpp_baseline") })
	return baselinePath, baselineErr
}

// BuildKillpointsBinary returns hpp-csi built with the tag hpp_killpoints,
// which SIGKILLs itself after the quota step named by $HPP_KILL_AT, for
// crash tests; $HPP_CSI_BIN, when set, must be such a build.
func BuildKillpointsBinary() (string, error) {
	if p := os.Getenv("HPP_CSI_BIN"); p != "" {
		return p, nil
	}
	killOnce.Do(func() { killPath, killErr = build("hpp-csi", "hpp-csi-killpoints", "-tags", "hpp_killpoints") })
	return killPath, killErr
}

// BuildCommand builds cmd/<component> of this checkout (as the Makefile
// does, CGO_ENABLED=0) into the user's cache and returns its path.
func BuildCommand(component string) (string, error) {
	return build(component, component)
}

func build(component, name string, flags ...string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "cmd", component)
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	dir := filepath.Join(cache, "hpp", "csitest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(dir, "hpp-csi-*.tmp")
	if err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	_ = tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, flags...), "-o", tmp.Name(), ".")...)
	cmd.Dir = src
	// As the Makefile and the images build it: a cgo build maps libc and
	// measures 1.6 MiB more idle RSS than what ships.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", name, err, stderr.String())
	}
	final := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	return final, nil
}

// Binary is BuildBinary for tests: a build failure fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := BuildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Config describes one driver process.
type Config struct {
	NodeID string
	Pools  []Pool
	// Dir holds the socket; it must exist.
	Dir string
	// LogLevel of the driver; "" means debug (every call logged).
	LogLevel string
	// Extra flags, appended last.
	Extra []string
}

// Driver is a running (or stopped, restartable) hpp-csi process.
type Driver struct {
	Socket string
	Pools  []Pool
	NodeID string
	Args   []string
	// Env is added to the test's environment for each (re)start.
	Env []string

	bin     string
	workDir string // the process's working directory; "" is the test's
	log     *syncBuffer

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current process has exited
	waitErr error
}

// Launch starts hpp-csi and waits until its socket accepts connections.
func Launch(bin string, cfg Config) (*Driver, error) {
	datadir, err := Datadir(cfg.Pools)
	if err != nil {
		return nil, err
	}
	level := cfg.LogLevel
	if level == "" {
		level = "debug"
	}
	d := &Driver{
		Socket: filepath.Join(cfg.Dir, "csi.sock"),
		Pools:  cfg.Pools,
		NodeID: cfg.NodeID,
		bin:    bin,
		log:    &syncBuffer{},
	}
	d.Args = append([]string{"--endpoint", "unix://" + d.Socket, "--nodeid", cfg.NodeID,
		"--datadir", datadir, "--log-format", "text", "--log-level", level}, cfg.Extra...)
	if err := d.start(); err != nil {
		return nil, err
	}
	return d, nil
}

// Start runs hpp-csi with the pools and extra flags for the test, waits for
// its socket, and stops it (printing its log if the test failed) at cleanup.
func Start(t testing.TB, nodeID string, pools []Pool, extra ...string) *Driver {
	t.Helper()
	d, err := Launch(Binary(t), Config{NodeID: nodeID, Pools: pools, Dir: t.TempDir(), Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stopping hpp-csi: %v", err)
		}
		if t.Failed() {
			t.Logf("hpp-csi log:\n%s", d.Log())
		}
	})
	return d
}

// StartCommand runs hpp-csi with exactly args, which must serve the socket
// (--endpoint=unix://<socket>), in workDir ("" for the test's own), and
// stops it at cleanup like Start. It is for tests of the command line
// itself, such as the KubeVirt DaemonSet's argument list.
func StartCommand(t testing.TB, socket, workDir string, args ...string) *Driver {
	t.Helper()
	d := &Driver{Socket: socket, Args: args, bin: Binary(t), workDir: workDir, log: &syncBuffer{}}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stopping hpp-csi: %v", err)
		}
		if t.Failed() {
			t.Logf("hpp-csi log:\n%s", d.Log())
		}
	})
	return d
}

func (d *Driver) start() error {
	cmd := exec.Command(d.bin, d.Args...)
	cmd.Dir = d.workDir
	if len(d.Env) > 0 {
		cmd.Env = append(os.Environ(), d.Env...)
	}
	cmd.Stdout, cmd.Stderr = d.log, d.log
	// The driver must not outlive a test binary that dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting hpp-csi: %w", err)
	}
	exited := make(chan struct{})
	d.mu.Lock()
	d.cmd, d.exited, d.waitErr = cmd, exited, nil
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", d.Socket); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			err := d.exitErr()
			if err == nil {
				err = errors.New("exit status 0")
			}
			return fmt.Errorf("hpp-csi exited at start: %w\n%s", err, d.log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = d.Kill()
	return fmt.Errorf("hpp-csi socket %s did not appear in %v\n%s", d.Socket, startTimeout, d.log.String())
}

func (d *Driver) exitErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waitErr
}

// Log returns what the driver printed so far, over all restarts.
func (d *Driver) Log() string { return d.log.String() }

// LogLen is the current length of the log, to read only what follows with
// LogSince.
func (d *Driver) LogLen() int { return d.log.Len() }

// LogSince returns the log from offset on.
func (d *Driver) LogSince(offset int) string { return d.log.StringFrom(offset) }

// Pid of the running process, 0 when none runs.
func (d *Driver) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Signal sends sig to the running process without waiting.
func (d *Driver) Signal(sig os.Signal) error {
	d.mu.Lock()
	cmd := d.cmd
	d.mu.Unlock()
	if cmd == nil {
		return errors.New("hpp-csi is not running")
	}
	return cmd.Process.Signal(sig)
}

// Wait for the current process to exit on its own (after Signal), and
// return its exit error (nil for exit status 0).
func (d *Driver) Wait(ctx context.Context) error {
	d.mu.Lock()
	exited := d.exited
	d.mu.Unlock()
	if exited == nil {
		return errors.New("hpp-csi was never started")
	}
	select {
	case <-exited:
		d.mu.Lock()
		d.cmd = nil
		d.mu.Unlock()
		return d.exitErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill sends SIGKILL and waits: a crash, not a shutdown.
func (d *Driver) Kill() error {
	if err := d.Signal(syscall.SIGKILL); err != nil {
		return nil // nothing runs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.Wait(ctx)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // killed, as asked
	}
	return err
}

// Restart starts the same driver again after Kill or Stop.
func (d *Driver) Restart() error {
	d.log.WriteString("--- csitest: restarting hpp-csi ---\n")
	return d.start()
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after 30s). It
// returns the process's exit error: a clean stop returns nil.
func (d *Driver) Stop() error {
	if err := d.Signal(syscall.SIGTERM); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = d.Kill()
		return errors.New("did not stop on SIGTERM within 30s (killed)")
	}
	return err
}

var httpAddrRE = regexp.MustCompile(`serving HTTP.*"what": ?"([a-z]+)", ?"address": ?"([^"]+)"`)

// HTTPAddress returns where the driver serves what ("health" or "metrics"),
// as it logged it (so --health-address 127.0.0.1:0 works), waiting for the
// log line up to 10s.
func (d *Driver) HTTPAddress(what string) (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, m := range httpAddrRE.FindAllStringSubmatch(d.Log(), -1) {
			if m[1] == what {
				return m[2], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("hpp-csi did not log a %q HTTP address", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the test's
// reads at the same time.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *syncBuffer) StringFrom(offset int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if offset > len(s) {
		return ""
	}
	return s[offset:]
}
