// Command pause is the pod sandbox image's only program: it holds the
// sandbox's namespaces open, reaps orphaned children (it is PID 1 of the
// pod when the pod shares its PID namespace) and exits 0 on SIGTERM or
// SIGINT, as kubelet expects of the pause container. Built with
// CGO_ENABLED=0 so the image needs nothing but this file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child without blocking, so none stays a zombie.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
