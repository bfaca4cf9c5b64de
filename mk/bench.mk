# hpp-csi node and abuse tests, and the benchmarks (all need root; without it
# the tests skip with the reason, or fail under CI=true, and the CSI
# benchmark says it skipped).
# BENCH_CSI_FLAGS passes flags to the CSI benchmark, e.g. "-ops 5000 -max-time 60s";
# BENCH_COPIES_FLAGS to the snapshot/clone one, e.g. "-rounds 5".

# BENCH_MORE lists the benchmark targets other mk files add (mk/cluster.mk:
# bench-e2e); `bench` runs them after its own. Recursive, so it is read when
# the recipe runs, after every mk file has been included.
BENCH_MORE +=

.PHONY: csi-tests
csi-tests: ## hpp-csi node tests (real mounts, tmpfs, XFS on loop) and abuse tests over the real socket, with -race (root)
	@echo "==> hpp-csi node and abuse tests (-race)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -race -count=1 ./csinode/ ./csiabuse/

.PHONY: quota-tests
quota-tests: ## enforced volume sizes on real loop devices, XFS and ext4 with project quotas, SIGKILL at every step (root; skips with the kernel's answer where it has no project quotas)
	@echo "==> enforced size node tests (-race; test/quotanode)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -race -count=1 ./quotanode/

.PHONY: quota-binaries
quota-binaries: ## the enforced size node tests as a binary to run elsewhere (a VM with quota support): _output/quotanode/{quotanode.test,hpp-csi}; see test/quotanode/doc.go
	@mkdir -p $(ROOT)/_output/quotanode
	@cd $(ROOT)/cmd/hpp-csi && CGO_ENABLED=0 go build -tags hpp_killpoints -o $(ROOT)/_output/quotanode/hpp-csi .
	@cd $(ROOT)/test && CGO_ENABLED=0 go test -c -o $(ROOT)/_output/quotanode/quotanode.test ./quotanode/
	@echo "==> _output/quotanode/quotanode.test and hpp-csi (hpp_killpoints build)"

.PHONY: mounter-tests
mounter-tests: ## hpp-mounter node tests (real loop devices, XFS, ext4, bind mounts found from mountinfo), with -race (root)
	@echo "==> hpp-mounter node tests (-race)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -race -count=1 ./mounternode/

.PHONY: bench
bench: ## benchmarks: hpp-csi over its real socket (table + JSON on stdout; root), then those of BENCH_MORE (bench-e2e)
	@echo "==> hpp-csi benchmark (cd test && go run ./bench/csi)"
	@cd $(ROOT)/test && go run ./bench/csi $(BENCH_CSI_FLAGS)
	@echo "==> snapshot and clone benchmark, reflink vs copy (cd test && go run ./bench/copies)"
	@cd $(ROOT)/test && go run ./bench/copies $(BENCH_COPIES_FLAGS)
	@echo "==> enforced sizes: create+delete with/without enforceSize, NodeGetVolumeStats of 100,000 files from quota vs walk (fake quota backend)"
	@cd $(ROOT)/cmd/hpp-csi && go test -run '^$$' -bench 'EnforcedCreateDelete' -benchtime 300x ./handlers/ | grep -E '^Benchmark'
	@cd $(ROOT)/cmd/hpp-csi && go test -run '^$$' -bench 'Stats100kFiles' -benchtime 3x -timeout 30m ./handlers/ | grep -E '^Benchmark'
	@$(foreach t,$(BENCH_MORE),$(MAKE) --no-print-directory $(t) &&) true
