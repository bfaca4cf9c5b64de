package csinode

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// The KubeVirt hostpath CSI DaemonSet's argument list starts hpp-csi
// unchanged: the pool's path is the volumes directory itself, and
// GetPluginInfo reports --version.
func TestUpstreamArgumentList(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "csi-data-dir")
	sock := filepath.Join(dir, "csi.sock")
	d := csitest.StartCommand(t, sock, "",
		"--drivername=kubevirt.io.hostpath-provisioner",
		"--v=3",
		"--endpoint=unix://"+sock,
		"--nodeid="+node,
		"--version=latest",
		`--datadir=[{"name":"legacy","path":"`+data+`"}]`)
	c := d.Client(t)
	info, err := c.GetPluginInfo(ctx(t), &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != contract.DriverName || info.GetVendorVersion() != "latest" {
		t.Fatalf("GetPluginInfo = %q %q; want the driver name and --version=latest", info.GetName(), info.GetVendorVersion())
	}
	// A StorageClass without parameters: the pool named legacy.
	roundTrip(t, c, "pvc-upstream", data, map[string]string{}, true)
}

// The same driver as the KubeVirt operator configures it: pool paths
// relative to the working directory ("<mount>/csi"), a snapshot directory
// beside the volumes, a shared pool, and /metrics over TLS.
func TestUpstreamOperatorArguments(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir() // stands for the container's "/"
	for _, mount := range []string{"local-data-dir", "nfs-data-dir"} {
		if err := os.Mkdir(filepath.Join(root, mount), 0o755); err != nil { // the pools' hostPath mounts
			t.Fatal(err)
		}
	}
	certFile, keyFile, roots := writeCert(t, root)
	sock := filepath.Join(root, "csi", "csi.sock")
	d := csitest.StartCommand(t, sock, root,
		"--drivername=kubevirt.io.hostpath-provisioner",
		"--v=5",
		"--endpoint=unix://"+sock,
		"--nodeid="+node,
		"--version=v1.2.3",
		`--datadir=[{"name":"local","path":"local-data-dir/csi","snapshotPath":"local-data-dir/snapshots","snapshotProvider":"reflink"},`+
			`{"name":"nfs","path":"nfs-data-dir/csi","shared":true}]`,
		"--metrics-cert-file="+certFile, "--metrics-key-file="+keyFile, "--metrics-tls-version=VersionTLS13",
		// hpp's own flag, so parallel tests do not fight over upstream's :8443.
		"--metrics-address=127.0.0.1:0")
	c := d.Client(t)
	info, err := c.GetPluginInfo(ctx(t), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetVendorVersion() != "v1.2.3" {
		t.Fatalf("GetPluginInfo = %v, %v; want vendor version v1.2.3", info, err)
	}
	roundTrip(t, c, "pvc-local", filepath.Join(root, "local-data-dir", "csi"), map[string]string{contract.ParamStoragePool: "local"}, true)
	roundTrip(t, c, "pvc-nfs", filepath.Join(root, "nfs-data-dir", "csi"), map[string]string{contract.ParamStoragePool: "nfs", contract.ParamOverlayCSI: "true"}, false)

	addr, err := d.HTTPAddress("metrics")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}}}
	resp, err := client.Get("https://localhost:" + port + "/metrics")
	if err != nil {
		t.Fatalf("/metrics over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || !strings.Contains(string(body), "kubevirt_hpp_pool_path_shared_with_os ") {
		t.Fatalf("/metrics = %d (TLS %v): %.300s; want 200 over TLS with kubevirt_hpp_pool_path_shared_with_os", resp.StatusCode, resp.TLS != nil, body)
	}
	// Plain HTTP gets nothing from a TLS port.
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics"); err == nil && resp.StatusCode == http.StatusOK {
		_ = resp.Body.Close()
		t.Fatal("/metrics answered plain HTTP on the TLS port")
	}
}

// roundTrip creates a volume, checks it is the directory <volumes>/<id>,
// publishes it with a real bind mount, writes through it, and deletes it.
func roundTrip(t *testing.T, c *csitest.Client, id, volumes string, params map[string]string, wantTopology bool) {
	t.Helper()
	resp, err := c.CreateVolume(ctx(t), csitest.CreateRequest(id, node, MiB, params))
	if err != nil {
		t.Fatalf("CreateVolume %s: %v", id, err)
	}
	if got := len(resp.GetVolume().GetAccessibleTopology()) > 0; got != wantTopology {
		t.Fatalf("CreateVolume %s: topology %v, want topology %v", id, resp.GetVolume().GetAccessibleTopology(), wantTopology)
	}
	dir := filepath.Join(volumes, id)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("volume directory %s: %v", dir, err)
	}
	target := filepath.Join(t.TempDir(), "mount")
	if _, err := c.NodePublishVolume(ctx(t), csitest.PublishRequest(id, target, resp.GetVolume().GetVolumeContext())); err != nil {
		t.Fatalf("NodePublishVolume %s: %v", id, err)
	}
	if err := os.WriteFile(filepath.Join(target, "file"), []byte(id), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "file")); err != nil || string(got) != id {
		t.Fatalf("file written through the mount, read from %s: %q, %v", dir, got, err)
	}
	if _, err := c.NodeUnpublishVolume(ctx(t), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume %s: %v", id, err)
	}
	if _, err := c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("DeleteVolume %s: %v", id, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("volume directory %s after DeleteVolume: %v", dir, err)
	}
}

// writeCert writes a certificate for localhost, from a CA of the test's,
// into dir and returns its files and a pool that trusts it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	ca := testutil.NewTestCA(t, "upstream-test-ca")
	certPEM, keyPEM, _ := ca.Issue(t, "localhost")
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return certFile, keyFile, roots
}
