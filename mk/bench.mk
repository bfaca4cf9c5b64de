# hpp-csi node and abuse tests, and the benchmarks (all need root; without it
# the tests skip with the reason, or fail under CI=true, and the CSI
# benchmark says it skipped).
# BENCH_CSI_FLAGS passes flags to the CSI benchmark, e.g. "-ops 5000 -max-time 60s";
# BENCH_COPIES_FLAGS to the snapshot/clone one, e.g. "-rounds 5".

# bench-e2e is defined by the cluster harness (mk/cluster.mk) when present;
# checked when the recipe runs, after every mk file has been read.
HAS_BENCH_E2E = $(shell grep -qsE '^bench-e2e[[:space:]]*:' $(ROOT)/Makefile $(ROOT)/mk/*.mk && echo yes)

.PHONY: csi-tests
csi-tests: ## hpp-csi node tests (real mounts, tmpfs, XFS on loop) and abuse tests over the real socket, with -race (root)
	@echo "==> hpp-csi node and abuse tests (-race)"
	@cd $(ROOT)/test && $(GOTEST) -race -count=1 ./csinode/ ./csiabuse/

.PHONY: mounter-tests
mounter-tests: ## hpp-mounter node tests (real loop devices, XFS, ext4, bind mounts found from mountinfo), with -race (root)
	@echo "==> hpp-mounter node tests (-race)"
	@cd $(ROOT)/test && $(GOTEST) -race -count=1 ./mounternode/

.PHONY: bench
bench: ## benchmarks: hpp-csi over its real socket (table + JSON on stdout; root), then bench-e2e if defined
	@echo "==> hpp-csi benchmark (cd test && go run ./bench/csi)"
	@cd $(ROOT)/test && go run ./bench/csi $(BENCH_CSI_FLAGS)
	@echo "==> snapshot and clone benchmark, reflink vs copy (cd test && go run ./bench/copies)"
	@cd $(ROOT)/test && go run ./bench/copies $(BENCH_COPIES_FLAGS)
	$(if $(HAS_BENCH_E2E),@$(MAKE) --no-print-directory bench-e2e,@echo "==> bench-e2e: not defined (mk/cluster.mk); skipped")
