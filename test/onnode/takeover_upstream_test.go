package onnode

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/testutil"
	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// upstreamDirEnv overrides where the upstream system is looked for.
const upstreamDirEnv = "HPP_UPSTREAM_DIR"

// findUpstream locates shared/upstream (the KubeVirt operator, driver,
// mounter and sidecars as binaries, with its deploy/): $HPP_UPSTREAM_DIR,
// else beside this checkout, beside a worktree's main checkout, or beside
// the checkout a clone was made from (CI clones elsewhere with shared/
// beside its origin). It returns the directory or why none was found.
func findUpstream(root string) (string, string) {
	if d := os.Getenv(upstreamDirEnv); d != "" {
		if upstreamComplete(d) {
			return d, ""
		}
		return "", fmt.Sprintf("%s=%s: no bin/hostpath-provisioner-operator and deploy/operator.yaml there", upstreamDirEnv, d)
	}
	var tried []string
	for _, base := range checkoutsOf(root) {
		d := filepath.Join(filepath.Dir(base), "shared", "upstream")
		if upstreamComplete(d) {
			return d, ""
		}
		tried = append(tried, d)
	}
	return "", fmt.Sprintf("the upstream system (bin/ and deploy/) is in none of %s (set %s)", strings.Join(tried, ", "), upstreamDirEnv)
}

// checkoutsOf is root, the main checkout of a worktree, and a clone's
// origin when it is a directory on this machine.
func checkoutsOf(root string) []string {
	out := []string{root}
	git := func(args ...string) string {
		b, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if common := git("rev-parse", "--path-format=absolute", "--git-common-dir"); common != "" {
		out = append(out, filepath.Dir(common))
	}
	origin := strings.TrimPrefix(git("remote", "get-url", "origin"), "file://")
	if filepath.IsAbs(origin) {
		out = append(out, strings.TrimSuffix(strings.TrimSuffix(origin, "/"), "/.git"))
	}
	return out
}

func upstreamComplete(d string) bool {
	for _, f := range []string{"bin/hostpath-provisioner-operator", "bin/hostpath-csi-driver", "bin/mounter", "deploy/operator.yaml", "deploy/webhook.yaml"} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			return false
		}
	}
	return true
}

// Upstream's image references, as its deploy/operator.yaml names them, so
// its manifests apply unchanged but for the pull policy (nothing here can
// pull: the images are imported into containerd).
const (
	upOperatorImage  = "quay.io/kubevirt/hostpath-provisioner-operator:latest"
	upDriverImage    = "quay.io/kubevirt/hostpath-csi-driver:latest"
	upRegistrarImage = "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.2.0"
	upLivenessImage  = "registry.k8s.io/sig-storage/livenessprobe:v2.3.0"
	upProvisionImage = "registry.k8s.io/sig-storage/csi-provisioner:v3.4.1"
	// hpp's operator overlay names csi-provisioner so (kustomize images:).
	overlayProvisionerImage = "registry.k8s.io/sig-storage/csi-provisioner:" + cluster.CSIProvisionerVersion
	// and csi-resizer so (hpp's one node-less Deployment beside the operator).
	overlayResizerImage = "registry.k8s.io/sig-storage/csi-resizer:" + cluster.CSIResizerVersion
)

// upstreamImages wraps upstream's binaries as its images lay them out
// (shared/upstream/README.md): the operator's image holds the operator
// (run by name from PATH, as its Deployment's command says) and the
// mounter, with the XFS tools and lsblk, and runs as a non-root user (the Deployment
// asks for runAsNonRoot and sets no user). csi-provisioner is the
// harness's v6.4.0 under the tag upstream's operator deploys (the one
// sidecar not built from upstream's tree). Also hpp's csi-provisioner
// under the name hpp's operator overlay gives it, so the README's commands
// apply that overlay as written.
// upstreamOperatorVersion is what the test puts in the operator image's
// version.txt: semver, naming the commit of shared/upstream's operator.
const upstreamOperatorVersion = "v0.0.0-03d4d6711f6a"

func upstreamImages(ctx context.Context, t *testing.T, dir string, bins cluster.Binaries) []cluster.Image {
	t.Helper()
	bin := func(name string) string { return filepath.Join(dir, "bin", name) }
	op := cluster.Image{
		Ref:        upOperatorImage,
		Entrypoint: []string{"/usr/bin/hostpath-provisioner-operator"},
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		User:       "1001",
		Files: []cluster.ImageFile{
			{Path: "/usr/bin/hostpath-provisioner-operator", Source: bin("hostpath-provisioner-operator"), Mode: 0o755},
			{Path: "/usr/bin/mounter", Source: bin("mounter"), Mode: 0o755},
			// Upstream's image carries /version.txt (its build writes the
			// release there) and the operator reads it from its working
			// directory, /, on every reconcile: without it the CR never gets
			// a status. The value is the commit the binary was built from.
			{Path: "/version.txt", Data: []byte(upstreamOperatorVersion)},
			{Path: "/tmp"},
		},
	}
	// Upstream's mounter runs /usr/bin/lsblk <storagePoolPath> -J in its
	// own container for a Block pool (the device's name), then chroots to
	// the host (--hostPath) for /usr/sbin/blkid, /usr/sbin/mkfs.xfs,
	// /usr/bin/findmnt and /usr/bin/mount: only lsblk must be in the image,
	// at the path upstream's binary names (its image is a distribution's,
	// with util-linux in /usr/bin).
	op, err := cluster.WithHostTools(ctx, op, append([]string{"lsblk"}, cluster.MounterTools...)...)
	if err != nil {
		t.Fatal(err)
	}
	op.Files = append(op.Files, cluster.ImageFile{Path: "/usr/bin/lsblk", Symlink: "../sbin/lsblk"})
	images := []cluster.Image{op}
	for _, c := range []struct{ ref, src, path string }{
		{upDriverImage, bin("hostpath-csi-driver"), "/hostpath-csi-driver"},
		{upRegistrarImage, bin("csi-node-driver-registrar"), "/csi-node-driver-registrar"},
		{upLivenessImage, bin("livenessprobe"), "/livenessprobe"},
		{upProvisionImage, bins.CSIProvisioner, "/csi-provisioner"},
		{overlayProvisionerImage, bins.CSIProvisioner, "/csi-provisioner"},
		{overlayResizerImage, bins.CSIResizer, "/csi-resizer"},
	} {
		img, err := cluster.ComponentImage(c.ref, c.src, c.path)
		if err != nil {
			t.Fatal(err)
		}
		if c.ref == upDriverImage {
			// Upstream's driver publishes with k8s mount-utils, which runs
			// mount(8) and umount(8): its image has util-linux.
			img.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
			if img, err = cluster.WithHostTools(ctx, img, "mount", "umount"); err != nil {
				t.Fatal(err)
			}
		}
		images = append(images, img)
	}
	return images
}

// upstreamOperatorYAML is upstream's deploy/operator.yaml with the one
// change a cluster without a registry needs: imagePullPolicy Always ->
// IfNotPresent.
func upstreamOperatorYAML(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "deploy", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, "imagePullPolicy: Always") || !strings.Contains(s, upOperatorImage) {
		t.Fatalf("%s/deploy/operator.yaml: no imagePullPolicy: Always or no %s; the test's one edit no longer applies", dir, upOperatorImage)
	}
	return strings.ReplaceAll(s, "imagePullPolicy: Always", "imagePullPolicy: IfNotPresent")
}

// upstreamWebhookYAML is what cert-manager makes of upstream's
// deploy/webhook.yaml (cert-manager is not available here, so the test
// plays its part): the serving certificate's Secret, signed by a CA of the
// test's, and the file's Service and ValidatingWebhookConfiguration with
// that CA injected as cert-manager's CA injector would. The Issuer and
// Certificate (cert-manager's own kinds) are left out.
func upstreamWebhookYAML(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "deploy", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const service = "hostpath-provisioner-operator-webhook-service"
	caPEM, certPEM, keyPEM := webhookCert(t, service+"."+namespace+".svc")
	var docs []string
	for _, doc := range strings.Split(string(b), "\n---") {
		switch {
		case strings.Contains(doc, "kind: Issuer"), strings.Contains(doc, "kind: Certificate"):
			continue
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			if !strings.Contains(doc, "\n  clientConfig:\n") {
				t.Fatalf("%s/deploy/webhook.yaml: no clientConfig to inject the CA into", dir)
			}
			doc = strings.Replace(doc, "\n  clientConfig:\n", "\n  clientConfig:\n    caBundle: "+base64.StdEncoding.EncodeToString(caPEM)+"\n", 1)
		}
		docs = append(docs, doc)
	}
	secret := fmt.Sprintf(`
apiVersion: v1
kind: Secret
type: kubernetes.io/tls
metadata:
  name: %s-cert
  namespace: %s
data:
  ca.crt: %s
  tls.crt: %s
  tls.key: %s
`, service, namespace, base64.StdEncoding.EncodeToString(caPEM), base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM))
	return secret + "\n---" + strings.Join(docs, "\n---")
}

// webhookCert makes a CA and a serving certificate for dnsName.
func webhookCert(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	ca := testutil.NewTestCA(t, "takeover-test-ca")
	certPEM, keyPEM, _ = ca.Issue(t, dnsName)
	return ca.PEM, certPEM, keyPEM
}
