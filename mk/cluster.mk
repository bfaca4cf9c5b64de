# The local Kubernetes cluster (test/cluster): its binaries, the e2e
# scenarios, `make demo` and the end-to-end provisioning benchmark. All of
# them need root (kubelet, containerd, mounts); without it they say so and
# skip. Cluster binaries are cached in $(HPP_CACHE) by version.

E2E_TIMEOUT ?= 45m
# Benchmark sizes; each runs with default and tuned csi-provisioner flags.
BENCH_E2E_SIZES ?= 10,100,500
# The controller-manager's default API QPS (20) caps binding near 4 claims/s
# whatever the provisioner does; 0 keeps Kubernetes' defaults.
BENCH_E2E_CONTROL_PLANE_QPS ?= 200
# Create/delete rounds of the operator benchmark (test/onnode/bench_test.go).
BENCH_OPERATOR_ROUNDS ?= 5
# The cluster binaries `make demo` runs: the control plane, kubelet and
# kubectl (k8s), etcd, and beside hpp-csi csi-provisioner and csi-resizer
# (test/cluster starts a csi-resizer with every real node's hpp-csi). Not
# the snapshotter set, which only the e2e, conformance and chaos tiers run
# (built from the k8s set's module it costs a cold demo only seconds, but
# it is not the demo's).
DEMO_BINARIES := k8s etcd csi-provisioner csi-resizer

.PHONY: cluster-binaries
cluster-binaries: ## build the cluster's binaries into $(HPP_CACHE) (k8s, etcd, csi-provisioner, csi-resizer, external-snapshotter; cold: ~20 min)
	@$(ROOT)/hack/cluster-binaries.sh

.PHONY: e2e
e2e: ## e2e scenarios on a local cluster with hpp-csi, hpp-legacy and hpp-operator's node-loss controller (root)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@$(MAKE) --no-print-directory hpp-csi-bin hpp-legacy-bin hpp-operator-bin
	@# -p 1: both packages need the machine's one local cluster.
	@echo "==> cluster harness tests and e2e scenarios (logs of a failed test: _output/e2e-logs/)"
	@cd $(ROOT)/test && $(call tier_env,$@) HPP_BIN_DIR=$(BIN) HPP_E2E_LOGS=$(ROOT)/_output/e2e-logs \
	  HPP_TIER_NAME=$@ HPP_TIER_LOG=$(ROOT)/_output/e2e.log $(GOTEST_TIER) -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v $(call tier_pkgs,$@)
else ifeq ($(CI),true)
	@echo "==> e2e FAILED: CI=true and the local cluster needs root (kubelet, containerd, mounts)" >&2; exit 1
else
	@echo "==> e2e SKIPPED: the local cluster needs root (kubelet, containerd, mounts); run make e2e as root"
endif

.PHONY: demo
demo: ## start a local cluster, provision a volume with hpp-csi, show it on the host, clean up (root)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps
	@$(ROOT)/hack/cluster-binaries.sh $(DEMO_BINARIES)
	@$(MAKE) --no-print-directory hpp-csi-bin
	@cd $(ROOT)/test && go run ./e2e/demo --bin-dir $(BIN)
else
	@echo "==> demo needs root (it runs kubelet and containerd on this machine): run sudo make demo" >&2; exit 1
endif

BENCH_MORE += bench-e2e
.PHONY: bench-e2e
bench-e2e: ## end-to-end provisioning benchmark on a local cluster (root): table and JSON
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@$(MAKE) --no-print-directory hpp-csi-bin
	@cd $(ROOT)/test && go run ./e2e/bench --bin-dir $(BIN) --sizes $(BENCH_E2E_SIZES) --control-plane-qps $(BENCH_E2E_CONTROL_PLANE_QPS)
	@$(MAKE) --no-print-directory hpp-legacy-bin
	@echo "==> hpp-legacy vs hpp-csi: 200 claims across 3 nodes"
	@cd $(ROOT)/test && go run ./bench/legacy --bin-dir $(BIN) -n 200 -control-plane-qps 200
	@echo "==> hpp-operator: CR to node pods Ready, and API requests per steady-state reconcile (operator as a pod on the real node)"
	@cd $(ROOT)/test && $(call tier_env,bench-e2e) HPP_BENCH_OPERATOR_ROUNDS=$(BENCH_OPERATOR_ROUNDS) \
	  go test -count=1 -timeout 30m -v -run '^TestOperatorBenchmark$$' ./onnode/
else
	@echo "==> bench-e2e SKIPPED: the local cluster needs root"
endif

# Cross-node clones (issue 28): N claims cloned at once from a golden image
# on a simulated node, pods on the real node reading theirs; the first
# transfer against tar, the bytes sent for clones 2 to N.
BENCH_CROSSNODE_N ?= 50
BENCH_CROSSNODE_DATA_MIB ?= 200
BENCH_MORE += bench-crossnode
.PHONY: bench-crossnode
bench-crossnode: ## cross-node clone benchmark on a local cluster (root): N clones of a golden image on another node, table and JSON
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@$(MAKE) --no-print-directory hpp-csi-bin
	@echo "==> cross-node clones: $(BENCH_CROSSNODE_N) claims from one golden image on a simulated node (cd test && go run ./bench/crossnode)"
	@cd $(ROOT)/test && go run ./bench/crossnode --bin-dir $(BIN) -n $(BENCH_CROSSNODE_N) -data-mib $(BENCH_CROSSNODE_DATA_MIB)
else
	@echo "==> bench-crossnode SKIPPED: the local cluster needs root"
endif

# hpp-csi alone, for the cluster targets (cheap when up to date).
.PHONY: hpp-csi-bin
hpp-csi-bin:
	@echo "==> building hpp-csi into $(BIN)"
	@mkdir -p $(BIN) && cd $(ROOT)/cmd/hpp-csi && go build -ldflags "$(LDFLAGS)" -o $(BIN)/hpp-csi .

.PHONY: hpp-legacy-bin
hpp-legacy-bin:
	@echo "==> building hpp-legacy into $(BIN)"
	@mkdir -p $(BIN) && cd $(ROOT)/cmd/hpp-legacy && go build -ldflags "$(LDFLAGS)" -o $(BIN)/hpp-legacy .

# hpp-operator, for the node-loss scenario (test/e2e/nodeloss_test.go).
.PHONY: hpp-operator-bin
hpp-operator-bin:
	@echo "==> building hpp-operator into $(BIN)"
	@mkdir -p $(BIN) && cd $(ROOT)/cmd/hpp-operator && go build -ldflags "$(LDFLAGS)" -o $(BIN)/hpp-operator .
