# The chaos tier (issue 31; test/chaos): faults from a printed seed under a
# workload on a local cluster, invariants checked during and after.
# HPP_CHAOS_SEED=<seed> replays a run; HPP_CHAOS_LENGTH (default 5m) sets
# how long faults are injected (30m for the long run).
CHAOS_TIMEOUT ?= 60m

.PHONY: chaos
chaos: ## chaos tier: faults from a printed seed under a workload on a local cluster (root; HPP_CHAOS_SEED replays)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@echo "==> chaos tier (seed and report printed; HPP_CHAOS_SEED=<seed> replays)"
	@cd $(ROOT)/test && $(call tier_env,$@) HPP_TIER_NAME=$@ $(GOTEST_TIER) -count=1 -timeout $(CHAOS_TIMEOUT) -v $(call tier_pkgs,$@)
else ifeq ($(CI),true)
	@echo "==> chaos FAILED: CI=true and the local cluster needs root (kubelet, containerd, mounts)" >&2; exit 1
else
	@echo "==> chaos SKIPPED: the local cluster needs root (kubelet, containerd, mounts); run make chaos as root"
endif
