package peer

import (
	"errors"
	"strings"
	"testing"
)

// A client whose certificate is still being issued is refused with the
// reason, and works as soon as the files are there, with no restart.
func TestPendingCredentials(t *testing.T) {
	e := start(t)
	dir := t.TempDir()
	c := &Client{Creds: PendingCredentials(dir)}
	_, err := fetchAll(t, c, e.nodeA(), KindVolume, "vol-1", "clone-b")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "peer credentials in "+dir) {
		t.Fatalf("fetch without a certificate yet: %v; want Unavailable naming the directory", err)
	}
	if n := e.source.openCount(); n != 0 {
		t.Fatalf("the source was opened %d times for a peer without a certificate", n)
	}
	writeCreds(t, dir, e.ca, e.ca.PEM, "node-b")
	got, err := fetchAll(t, c, e.nodeA(), KindVolume, "vol-1", "clone-b")
	if err != nil || len(got) != len(volumeData) {
		t.Fatalf("fetch once the certificate is there: %d bytes, %v", len(got), err)
	}
}
