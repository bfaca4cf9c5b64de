// Package csitest runs the real hpp-csi binary for tests: built from the
// workspace (or taken from $HPP_CSI_BIN), serving on a real unix socket, with
// its log kept for the failing test.
package csitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Pool is one entry of --datadir.
type Pool struct {
	Name            string  `json:"name"`
	Path            string  `json:"path"`
	ReservedBytes   int64   `json:"reservedBytes,omitempty"`
	ReservedPercent float64 `json:"reservedPercent,omitempty"`
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the hpp-csi binary, building it once per test process.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HPP_CSI_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "hpp-csi")
		dir, err := os.MkdirTemp("", "hpp-csi-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "hpp-csi")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = src
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build hpp-csi: %v: %s", err, stderr.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Driver is a running hpp-csi process.
type Driver struct {
	Socket string
	Pools  []Pool
	NodeID string
	Args   []string
	cmd    *exec.Cmd
	log    *bytes.Buffer
	done   chan error
	t      testing.TB
}

// Start runs hpp-csi with the pools and extra flags and waits for its socket.
func Start(t testing.TB, nodeID string, pools []Pool, extra ...string) *Driver {
	t.Helper()
	dir := t.TempDir()
	datadir, err := json.Marshal(pools)
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{
		Socket: filepath.Join(dir, "csi.sock"),
		Pools:  pools,
		NodeID: nodeID,
		t:      t,
	}
	d.Args = append([]string{"--endpoint", "unix://" + d.Socket, "--nodeid", nodeID,
		"--datadir", string(datadir), "--log-format", "text", "--log-level", "debug"}, extra...)
	d.start()
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("hpp-csi log:\n%s", d.Log())
		}
	})
	return d
}

func (d *Driver) start() {
	d.t.Helper()
	d.cmd = exec.Command(Binary(d.t), d.Args...)
	d.log = &bytes.Buffer{}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("starting hpp-csi: %v", err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", d.Socket); err == nil {
			_ = c.Close()
			return
		}
		select {
		case err := <-d.done:
			d.t.Fatalf("hpp-csi exited at start: %v\n%s", err, d.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	d.t.Fatalf("hpp-csi socket %s did not appear in 30s\n%s", d.Socket, d.log.String())
}

// Log returns what the driver printed so far.
func (d *Driver) Log() string { return d.log.String() }

// Pid of the running process.
func (d *Driver) Pid() int { return d.cmd.Process.Pid }

// Kill sends SIGKILL and waits: a crash, not a shutdown.
func (d *Driver) Kill() {
	if d.cmd == nil || d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.done
	d.cmd = nil
}

// Restart starts the same driver again after Kill or Stop.
func (d *Driver) Restart() { d.start() }

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after 30s).
func (d *Driver) Stop() error {
	if d.cmd == nil {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		err = <-d.done
		err = fmt.Errorf("did not stop on SIGTERM within 30s (killed): %v", err)
	}
	d.cmd = nil
	return err
}

// Wait for the process to exit on its own (after Stop was signalled elsewhere).
func (d *Driver) Wait(ctx context.Context) error {
	select {
	case err := <-d.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
