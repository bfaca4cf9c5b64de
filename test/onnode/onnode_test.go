// Package onnode installs hpp on the real node of the local cluster the way
// users do: locally built images imported into containerd, the deploy/
// kustomize overlays rendered with kustomize images: pointing at them and
// applied with kubectl, every component running as a pod (issues 11 and
// 12's on-node proofs). `make operator-on-node` runs it (root).
package onnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Names the deploy/ tree gives the objects the test waits on.
const (
	namespace    = "hostpath-provisioner"
	csiDaemonSet = "hostpath-provisioner-csi"
	legacyDS     = "hostpath-provisioner"
	resizerName  = "hostpath-provisioner-csi-resizer"
	operatorName = "hostpath-provisioner-operator"
	crName       = "hostpath-provisioner"
	// upstreamPath is the host directory deploy/ uses for volumes; the
	// test moves it into the cluster directory, so teardown removes it.
	upstreamPath = "/var/hpvolumes"
)

// Image references: the overlays' own names for hpp's images (tag
// "latest"); csi-provisioner, which the overlays take from
// registry.k8s.io, is renamed through kustomize images: as a user with a
// mirror would.
const (
	csiImage         = "localhost/hpp/hpp-csi:latest"
	legacyImage      = "localhost/hpp/hpp-legacy:latest"
	operatorImage    = "localhost/hpp/hpp-operator:latest"
	provisionerImage = "localhost/hpp/csi-provisioner:" + cluster.CSIProvisionerVersion
	upstreamProvName = "registry.k8s.io/sig-storage/csi-provisioner"
	resizerImage     = "localhost/hpp/csi-resizer:" + cluster.CSIResizerVersion
	upstreamResName  = "registry.k8s.io/sig-storage/csi-resizer"
)

// env is the running cluster and what the subtests share.
type env struct {
	c    *cluster.Cluster
	bins cluster.Binaries
	// pools is the directory under the cluster's that replaces
	// upstreamPath: every pool of every install lives below it.
	pools string
}

func TestDeployOnTheRealNode(t *testing.T) {
	if reason := skipReason(); reason != "" {
		if os.Getenv("CI") == "true" && os.Getenv("HPP_TEST_TIER") == "onnode" {
			t.Fatalf("CI=true: %s", reason)
		}
		t.Skip(reason)
	}
	e := startOnNodeCluster(t)

	t.Run("csi-only overlay", e.testCSIOnly)
	t.Run("legacy overlay", e.testLegacy)
	t.Run("operator overlay", e.testOperator)
	t.Run("pvcTemplate pools", e.testPVCPools)
	// Last: every request the components made is in the log by now.
	t.Run("no request of a component was forbidden", e.testNoForbidden)
	t.Run("every permission of a component was used", e.testEveryGrantUsed)
}

func skipReason() string {
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "onnode" {
		return fmt.Sprintf("runs with `make operator-on-node` (HPP_TEST_TIER=onnode), this is tier %q", tier)
	}
	if os.Geteuid() != 0 {
		return "the local cluster needs root (kubelet, containerd, mounts)"
	}
	return ""
}

// startOnNodeCluster starts the local cluster the way users' nodes run
// hpp (images built from this checkout, PodNetwork with kube-proxy, the
// standard kubelet root, the audit log) and stops it when the test ends,
// saving its logs to $HPP_ONNODE_LOGS if the test failed. Extra images
// are imported beside hpp's.
func startOnNodeCluster(t *testing.T, extra ...cluster.Image) *env {
	t.Helper()
	ctx := t.Context()
	cache, err := cluster.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	bins := cluster.BinariesFromCache(cache)
	images := append(componentImages(ctx, t, bins), extra...)
	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Binaries: bins, Images: images, HandleSignals: true,
		PodNetwork: true, StandardKubeletRoot: true, AuditLog: true,
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("start the cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogTails(os.Stdout, 40)
			if dir := os.Getenv("HPP_ONNODE_LOGS"); dir != "" {
				if err := c.SaveLogs(dir); err != nil {
					t.Logf("save logs: %v", err)
				}
			}
		}
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if err := c.Stop(stopCtx); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	t.Logf("cluster up in %s", time.Since(started).Round(time.Second))
	return &env{c: c, bins: bins, pools: filepath.Join(c.Dir, "pools")}
}

// repoRoot is the checkout this file is in: the overlays and the commands
// are built from it.
func repoRoot(t *testing.T) string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// componentImages builds hpp-csi, hpp-legacy and hpp-operator from this
// checkout (static, as their Dockerfiles do) and wraps them and the cached
// csi-provisioner as images laid out like their Dockerfiles'; hpp-mounter's
// image also carries this machine's XFS tools (cluster.MounterImage).
func componentImages(ctx context.Context, t *testing.T, bins cluster.Binaries) []cluster.Image {
	dir := t.TempDir()
	var images []cluster.Image
	for _, c := range []struct{ name, ref string }{
		{"hpp-csi", csiImage}, {"hpp-legacy", legacyImage}, {"hpp-operator", operatorImage},
	} {
		bin := filepath.Join(dir, c.name)
		if err := kit.BuildCommand(ctx, c.name, bin); err != nil {
			t.Fatal(err)
		}
		img, err := cluster.ComponentImage(c.ref, bin, "/usr/bin/"+c.name)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	if bins.CSIProvisioner == "" {
		t.Fatal("csi-provisioner binary not in the cache: run make cluster-binaries")
	}
	// Upstream's image runs /csi-provisioner.
	img, err := cluster.ComponentImage(provisionerImage, bins.CSIProvisioner, "/csi-provisioner")
	if err != nil {
		t.Fatal(err)
	}
	images = append(images, img)
	// Upstream's csi-resizer image runs /csi-resizer.
	if img, err = cluster.ComponentImage(resizerImage, bins.CSIResizer, "/csi-resizer"); err != nil {
		t.Fatal(err)
	}
	images = append(images, img)
	// hpp-mounter with the XFS tools inside (pvcTemplate pools).
	mounter := filepath.Join(dir, "hpp-mounter")
	if err := kit.BuildCommand(ctx, "hpp-mounter", mounter); err != nil {
		t.Fatal(err)
	}
	if img, err = cluster.MounterImage(ctx, mounterImage, mounter); err != nil {
		t.Fatal(err)
	}
	return append(images, img)
}
