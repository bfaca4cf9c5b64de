// Package conformance runs the conformance tier (DESIGN.md §4, tier 4):
// Kubernetes' own external storage e2e suite (e2e.test from
// k8s.io/kubernetes, "External Storage" driven by driver.yaml) against
// hpp-csi on the real node of a local cluster (test/cluster), in parallel
// with the ginkgo CLI, writing a JUnit report and printing a summary.
//
// The binaries (e2e.test, agnhost, ginkgo) come from
// `hack/cluster-binaries.sh conformance`, pinned by test/conformance-tools
// to the same Kubernetes as the cluster. The suite's images are built on
// this machine (busybox and agnhost, see cluster.AgnhostImage) under the
// names e2e.test asks for, with KUBE_TEST_REPO_LIST pointing the suite's
// registry at localhost/e2e-test-images.
//
// Every test the focus selects must pass, or be listed in skipped.yaml
// with the reason it cannot apply. `make conformance` runs it.
package conformance
