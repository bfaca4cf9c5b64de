# The takeover tier (issue 21; test/onnode/takeover_*_test.go): upstream's
# real KubeVirt operator, driver, mounter and sidecars (shared/upstream,
# beside the checkout or its origin) installed on the local cluster's node,
# then hpp-migrate takeover --plan, the switch, the way back and the
# uninstall exactly as deploy/README.md writes them. Needs root; under
# CI=true a missing upstream or root fails, otherwise it skips saying why.
# A storagePools CR with four pools (a directory pool, two Filesystem
# pvcTemplate pools and a Block one, an empty loop device upstream's
# mounter formats), about 6 minutes; then the same from upstream's legacy
# pathConfig CR (TestTakeoverPathConfigOnTheRealNode,
# takeover_pathconfig_test.go: its legacy provisioner's hostPath PVs and
# its CSI pool legacy), about 5 minutes.

.PHONY: takeover-on-node
takeover-on-node: ## switch a node running upstream's operator to hpp and back, as deploy/README.md says (root)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@echo "==> takeover from upstream's operator on the real node (logs of a failure: _output/takeover-logs/)"
	@cd $(ROOT)/test && $(call tier_env,$@) HPP_ONNODE_LOGS=$(ROOT)/_output/takeover-logs \
	  HPP_TIER_NAME=$@ HPP_TIER_LOG=$(ROOT)/_output/takeover.log $(GOTEST_TIER) -count=1 -timeout 30m -v -run '^(TestTakeoverOnTheRealNode|TestTakeoverPathConfigOnTheRealNode)$$' $(call tier_pkgs,$@)
else ifeq ($(CI),true)
	@echo "==> takeover-on-node FAILED: CI=true and the local cluster needs root" >&2; exit 1
else
	@echo "==> takeover-on-node SKIPPED: the local cluster needs root (kubelet, containerd, mounts)"
endif
