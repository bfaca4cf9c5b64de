package serve

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// ParseEndpoint accepts unix:///abs/path, unix:/abs/path or a plain absolute
// path. TCP is refused: the CSI socket carries no authentication, and on a
// node it only ever needs to reach kubelet and the sidecars.
func ParseEndpoint(ep string) (string, error) {
	switch {
	case strings.HasPrefix(ep, "unix://"):
		ep = strings.TrimPrefix(ep, "unix://")
	case strings.HasPrefix(ep, "unix:"):
		ep = strings.TrimPrefix(ep, "unix:")
	case strings.Contains(ep, "://"):
		return "", fmt.Errorf("--endpoint: %q: only unix sockets are supported (unix:///path/csi.sock or /path/csi.sock); TCP would expose an unauthenticated storage API", ep)
	}
	if !filepath.IsAbs(ep) {
		return "", fmt.Errorf("--endpoint: %q must be an absolute socket path", ep)
	}
	return filepath.Clean(ep), nil
}

// listenUnix removes a stale socket (left by a killed process) before
// listening; anything else at the path is left alone and reported.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
		}
	}
	return net.Listen("unix", path)
}
