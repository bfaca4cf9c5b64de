# The benchmarks (`make bench`; not part of `make test`). The CSI benchmark
# needs root; without it it says it skipped.
# BENCH_CSI_FLAGS passes flags to the CSI benchmark, e.g. "-ops 5000 -max-time 60s";
# BENCH_COPIES_FLAGS to the snapshot/clone one, e.g. "-rounds 5".

# BENCH_MORE lists the benchmark targets other mk files add (mk/cluster.mk:
# bench-e2e); `bench` runs them after its own. Recursive, so it is read when
# the recipe runs, after every mk file has been included.
BENCH_MORE +=

.PHONY: bench
bench: ## benchmarks: hpp-csi over its real socket (table + JSON on stdout; root), then those of BENCH_MORE (bench-e2e)
	@echo "==> hpp-csi benchmark (cd test && go run ./bench/csi)"
	@cd $(ROOT)/test && go run ./bench/csi $(BENCH_CSI_FLAGS)
	@echo "==> snapshot and clone benchmark, reflink vs copy (cd test && go run ./bench/copies)"
	@cd $(ROOT)/test && go run ./bench/copies $(BENCH_COPIES_FLAGS)
	@echo "==> enforced sizes: create+delete with/without enforceSize, NodeGetVolumeStats of 100,000 files from quota vs walk (fake quota backend)"
	@cd $(ROOT)/cmd/hpp-csi && go test -run '^$$' -bench 'EnforcedCreateDelete' -benchtime 300x ./handlers/ | grep -E '^Benchmark'
	@cd $(ROOT)/cmd/hpp-csi && go test -run '^$$' -bench 'Stats100kFiles' -benchtime 3x -timeout 30m ./handlers/ | grep -E '^Benchmark'
	@echo "==> tree stream (clones between nodes) against GNU tar, through a pipe on tmpfs (root)"
	@cd $(ROOT) && go test -run '^$$' -bench 'StreamVsTar' -benchtime 3x ./internal/treecopy/ | grep -E '^Benchmark'
	@$(foreach t,$(BENCH_MORE),$(MAKE) --no-print-directory $(t) &&) true
