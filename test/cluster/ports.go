package cluster

import (
	"fmt"
	"net"
)

// portAllocator hands out distinct free TCP ports on 127.0.0.1. A port is
// free when the kernel gives it to a listener on :0; it is released right
// away for the component to bind, and never handed out twice by one
// allocator.
type portAllocator struct {
	used map[int]bool
}

func newPortAllocator() *portAllocator { return &portAllocator{used: map[int]bool{}} }

func (a *portAllocator) next() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("free port on 127.0.0.1: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !a.used[port] {
			a.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("free port on 127.0.0.1: no new port in 100 tries")
}
