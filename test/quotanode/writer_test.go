package quotanode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The writer is what a pod is: a process without CAP_SYS_RESOURCE (ext4
// lets that capability write past a quota), here the test binary itself
// run as nobody, keeping one file open and obeying one command a line:
// "write <MiB>" (answers the bytes written and the errno, 0 for none),
// "truncate", "sync".
const writerEnv = "QUOTANODE_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(runWriter(path))
	}
	os.Exit(m.Run())
}

func runWriter(path string) int {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Println("open", errnoOf(err))
		return 1
	}
	fmt.Println("ok")
	chunk := make([]byte, MiB)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "write":
			n, _ := strconv.Atoi(arg)
			var written int64
			var werr error
			for range n {
				w, err := f.Write(chunk)
				written += int64(w)
				if err != nil {
					werr = err
					break
				}
			}
			fmt.Println(written, errnoOf(werr))
		case "truncate":
			err := f.Truncate(0)
			if err == nil {
				_, err = f.Seek(0, io.SeekStart)
			}
			fmt.Println(0, errnoOf(err))
		case "sync":
			fmt.Println(0, errnoOf(f.Sync()))
		}
	}
	return 0
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	if err != nil {
		return -1
	}
	return 0
}

type writer struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// stop closes the writer's file: its process exits, and the volume can be
// unmounted.
func (w *writer) stop() {
	_ = w.in.Close()
	_ = w.cmd.Wait()
}

// startWriter opens path in a writer process running as nobody.
func startWriter(t *testing.T, path string) *writer {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &writer{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(w.stop)
	if line := w.line(); line != "ok" {
		t.Fatalf("writer (as nobody) could not open %s: %s", path, line)
	}
	return w
}

func (w *writer) line() string {
	if !w.out.Scan() {
		w.t.Fatalf("writer ended: %v", w.out.Err())
	}
	return w.out.Text()
}

// do sends a command and returns the bytes written and the errno.
func (w *writer) do(cmd string) (int64, syscall.Errno) {
	w.t.Helper()
	if _, err := fmt.Fprintln(w.in, cmd); err != nil {
		w.t.Fatal(err)
	}
	var n int64
	var errno int
	if _, err := fmt.Sscan(w.line(), &n, &errno); err != nil {
		w.t.Fatal(err)
	}
	return n, syscall.Errno(errno)
}
