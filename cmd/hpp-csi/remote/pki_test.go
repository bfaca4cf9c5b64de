package remote

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func newCA(t *testing.T) *testutil.TestCA { return testutil.NewTestCA(t, "hpp peer test CA") }

// nodeCreds writes a certificate for node into a directory laid out as a
// TLS Secret (tls.crt, tls.key, ca.crt) and loads it.
func nodeCreds(t *testing.T, ca *testutil.TestCA, node string) *peer.Credentials {
	t.Helper()
	certPEM, keyPEM, _ := ca.Issue(t, node)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.PEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := peer.LoadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
