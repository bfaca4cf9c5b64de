package peer

import (
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

func newCA(t *testing.T, name string) *testutil.TestCA { return testutil.NewTestCA(t, name) }

// writeCreds writes a node's credentials into dir as a Secret volume
// holds them, each file replaced by a rename (a Secret volume swaps them
// all at once; a rename per file is close enough for one test's reader).
// It returns the certificate's serial number.
func writeCreds(t *testing.T, dir string, ca *testutil.TestCA, trusted []byte, dnsNames ...string) *big.Int {
	t.Helper()
	certPEM, keyPEM, sn := ca.Issue(t, dnsNames...)
	for name, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM, caFile: trusted} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return sn
}

// nodeCreds makes a directory with a certificate for node signed by ca,
// trusting ca, and loads it.
func nodeCreds(t *testing.T, ca *testutil.TestCA, node string) (*Credentials, string) {
	t.Helper()
	dir := t.TempDir()
	writeCreds(t, dir, ca, ca.PEM, node)
	c, err := LoadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}
