package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec describes one host process the harness runs and supervises.
type ProcessSpec struct {
	// Name identifies the process in logs and errors; unique within a cluster
	// (e.g. "kubelet", "hpp-csi/sim-1"). Its log file is <logs>/<Name>.log
	// with "/" replaced by "_".
	Name string
	// Path is the absolute path of the binary.
	Path string
	Args []string
	// Env is added to a minimal environment (PATH, HOME); nothing of the
	// test process's own environment leaks in.
	Env []string
	// Dir is the working directory; the cluster directory when empty.
	Dir string
	// StopTimeout bounds the wait after SIGTERM before SIGKILL; 10s if zero.
	StopTimeout time.Duration
	// RestartOnExit starts the process again one second after it exits on
	// its own or is killed (Kill), as kubelet restarts a crashed container:
	// csi-provisioner exits when it loses its driver's socket. Stop ends
	// it for good.
	RestartOnExit bool

	// cloneflags puts the process in new namespaces (node-init's).
	cloneflags uintptr
	// inNode runs the process inside the PID and mount namespaces of this
	// running node-init, through nsenter (see nodens_linux.go).
	inNode *Process
}

func (s ProcessSpec) validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("process name: must not be empty"))
	}
	if !filepath.IsAbs(s.Path) {
		errs = append(errs, fmt.Errorf("process %q path %q: must be absolute", s.Name, s.Path))
	} else if fi, err := os.Stat(s.Path); err != nil {
		errs = append(errs, fmt.Errorf("process %q path: %w", s.Name, err))
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("process %q path %q: not an executable file", s.Name, s.Path))
	}
	if s.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("process %q stop timeout %v: must not be negative", s.Name, s.StopTimeout))
	}
	return errors.Join(errs...)
}

// Process is a running (or exited) host process with its log file. Start
// it again with Restart after Kill or Stop; the log file is appended to.
type Process struct {
	spec    ProcessSpec
	logPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current incarnation exits
	waitErr  error
	stopped  bool // Stop was called: no automatic restart
	restarts int
}

func startProcess(spec ProcessSpec, logDir, workDir string) (*Process, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if spec.Dir == "" {
		spec.Dir = workDir
	}
	if spec.StopTimeout == 0 {
		spec.StopTimeout = 10 * time.Second
	}
	p := &Process{
		spec:    spec,
		logPath: filepath.Join(logDir, strings.ReplaceAll(spec.Name, "/", "_")+".log"),
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name returns the process's name.
func (p *Process) Name() string { return p.spec.Name }

// LogPath returns the file that receives the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Pid returns the process id of the current incarnation, 0 if not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.runningLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the current incarnation has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Process) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited returns a channel closed when the current incarnation exits.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *Process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("process %s: already running with pid %d", p.spec.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("process %s log: %w", p.spec.Name, err)
	}
	path, args := p.spec.Path, p.spec.Args
	if p.spec.inNode != nil {
		pid := p.spec.inNode.Pid()
		if pid == 0 {
			_ = logf.Close()
			return fmt.Errorf("process %s: the node namespace's %s is not running", p.spec.Name, p.spec.inNode.Name())
		}
		path, args = nodeCommand(pid, p.spec.Dir, path, args)
	}
	fmt.Fprintf(logf, "==> %s harness: starting %s %s\n", time.Now().Format(time.RFC3339Nano), path, strings.Join(args, " "))
	// Not CommandContext: a process outlives the context that started it
	// and is stopped by Stop, in the order teardown needs.
	cmd := exec.Command(path, args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = append([]string{"PATH=" + hostPath, "HOME=/root"}, p.spec.Env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's Ctrl-C reaches only the test
		// binary, whose handler then tears down in order; Pdeathsig kills
		// the process if the test binary dies without tearing down.
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: p.spec.cloneflags,
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("process %s: start %s: %w", p.spec.Name, p.spec.Path, err)
	}
	done := make(chan struct{})
	if p.cmd != nil {
		p.restarts++
	}
	p.cmd, p.done, p.waitErr = cmd, done, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "==> %s harness: %s exited: %v\n", time.Now().Format(time.RFC3339Nano), p.spec.Name, errOrOK(err))
		_ = logf.Close()
		p.mu.Lock()
		p.waitErr = err
		again := p.spec.RestartOnExit && !p.stopped
		p.mu.Unlock()
		close(done)
		if again {
			time.Sleep(time.Second)
			p.mu.Lock()
			again = !p.stopped && !p.runningLocked()
			p.mu.Unlock()
			if again {
				_ = p.start()
			}
		}
	}()
	return nil
}

// Restarts counts the automatic restarts (RestartOnExit).
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// WaitRunning waits until a new incarnation runs (after an automatic
// restart) or ctx ends.
func (p *Process) WaitRunning(ctx context.Context) error {
	return poll(ctx, startTimeout, 100*time.Millisecond, "process "+p.spec.Name+" running", func(context.Context) (bool, error) {
		return p.Running(), nil
	})
}

func errOrOK(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Restart starts a new incarnation of a process that has exited (and
// re-enables RestartOnExit after a Stop).
func (p *Process) Restart() error {
	p.mu.Lock()
	p.stopped = false
	p.mu.Unlock()
	return p.start()
}

// Kill sends SIGKILL to the process group and waits for the exit, as a
// crash would: nothing gets a chance to clean up.
func (p *Process) Kill(ctx context.Context) error {
	return p.signalAndWait(ctx, syscall.SIGKILL, 0)
}

// Stop sends SIGTERM, waits up to the spec's StopTimeout, then SIGKILL.
// Stopping a process that has exited is a no-op.
func (p *Process) Stop(ctx context.Context) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return p.signalAndWait(ctx, syscall.SIGTERM, p.spec.StopTimeout)
}

func (p *Process) signalAndWait(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	// The group, so children (e.g. a shell's) go too.
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("process %s pid %d: still running 10s after SIGKILL", p.spec.Name, cmd.Process.Pid)
	}
}

// ExitError returns how the last incarnation ended (nil while running or
// after a clean exit).
func (p *Process) ExitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return nil
	}
	return p.waitErr
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.logPath, n) }

// tailFile returns the last n lines of a file, or a note why it cannot.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }()
	// Logs can be large; the tail lives in the last few hundred KiB.
	const window = 512 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// hostPath is the PATH every harness process gets: the Debian locations of
// containerd, runc, iptables and friends, and nothing user specific.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
