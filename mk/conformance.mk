# The conformance tier (test/conformance): Kubernetes' own external storage
# e2e suite (e2e.test of the pinned k8s.io/kubernetes, "External Storage"
# with test/conformance/driver.yaml) against hpp-csi on the real node of a
# local cluster, 4 ginkgo processes (HPP_CONFORMANCE_PROCS). Needs root. Writes
# _output/conformance/junit.xml, ginkgo.log and summary.txt (and
# cluster-logs/ after a failure).
#
# In `make test` before chaos; its programs are built first by the tier
# conformance-binaries at the end of the quota VM lane (test/tiers.txt).
# Measured 2026-11-23 on 2 busy cores: building e2e.test, agnhost and ginkgo takes about 7 min once the
# k8s set is built (they share its Go build cache; ~200 packages of their
# own), 1 min when only the link is left, nothing once cached in
# $(HPP_CACHE); the run takes about 9 min (73 specs selected, 4 ginkgo
# processes; 10 min 32 s with 2). `HPP_CONFORMANCE=0 make test`
# leaves it out.

CONFORMANCE_TIMEOUT ?= 60m
# A regular expression that narrows the run to some of the tier's tests
# (e.g. CONFORMANCE_FOCUS=subPath), for working on one failure.
CONFORMANCE_FOCUS ?=

.PHONY: conformance-binaries
conformance-binaries: ## build e2e.test, agnhost and ginkgo into $(HPP_CACHE) (cold: minutes)
	@$(ROOT)/hack/cluster-binaries.sh conformance

.PHONY: conformance
conformance: ## Kubernetes external storage e2e suite against hpp-csi on a local cluster (root; ~8 min when built)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps
	@$(ROOT)/hack/cluster-binaries.sh k8s csi-provisioner csi-resizer etcd snapshotter conformance
	@$(MAKE) --no-print-directory hpp-csi-bin
	@echo "==> conformance: External Storage e2e suite (report: _output/conformance/junit.xml)"
	@cd $(ROOT)/test && $(call tier_env,$@) HPP_BIN_DIR=$(BIN) HPP_CONFORMANCE_OUTPUT=$(ROOT)/_output/conformance \
	  HPP_CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' HPP_TIER_NAME=$@ HPP_TIER_LOG=$(ROOT)/_output/conformance.log \
	  $(GOTEST_TIER) -count=1 -timeout $(CONFORMANCE_TIMEOUT) -v -run '^TestExternalStorage$$' $(call tier_pkgs,$@)
else
	@echo "==> conformance SKIPPED: the local cluster needs root (kubelet, containerd, mounts); run make conformance as root"
endif
