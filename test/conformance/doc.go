// Package conformance runs the conformance tier (docs/design.md, Tests):
// Kubernetes' own external storage e2e suite (e2e.test from
// k8s.io/kubernetes, "External Storage" driven by driver.yaml) against
// hpp-csi on the real node of a local cluster (test/cluster), in parallel
// with the ginkgo CLI, writing a JUnit report and printing a summary.
//
// The binaries (e2e.test, agnhost, ginkgo) come from
// `hack/cluster-binaries.sh conformance`, pinned by test/k8s-tools
// to the same Kubernetes as the cluster. The suite's images are built on
// this machine (busybox and agnhost, see cluster.AgnhostImage) under the
// names e2e.test asks for, with KUBE_TEST_REPO_LIST pointing the suite's
// registry at localhost/e2e-test-images.
//
// Every test the focus selects must pass, or be listed in skipped.yaml
// with the reason it cannot apply. `make conformance` runs it.
//
// Some tests look at the node itself through a privileged host-exec pod
// that runs `nsenter --mount=/rootfs/proc/1/ns/mnt` and expects kubelet's
// root at /var/lib/kubelet ("volumeMode should not mount / map unused
// volumes in a pod" lists /var/lib/kubelet/pods/<uid>/volumes). That works
// here because test/cluster runs the real node's containerd and kubelet in
// their own PID and mount namespaces, with the harness's init as PID 1 and
// kubelet's root bind-mounted at /var/lib/kubelet inside (this VM's own
// PID 1 cannot be entered: see test/cluster/nodens_linux.go).
package conformance
