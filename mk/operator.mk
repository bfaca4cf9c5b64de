# hpp-operator and deploy/: code generation, the envtest tier (the
# reconciler, the webhook and every kustomize overlay against the real
# kube-apiserver and etcd that cluster-binaries builds; no root needed) and
# operator-on-node (deploy/ installed on the local cluster's real node, as
# pods; root). Packages and environment from test/tiers.txt.

.PHONY: generate
generate: ## regenerate the CRD, deepcopy and deploy/ manifests from code
	@$(ROOT)/hack/generate.sh

.PHONY: generate-check
generate-check: ## fail when generated files differ from what make generate writes
	@$(ROOT)/hack/generate.sh --check

.PHONY: operator-envtest
operator-envtest: ## hpp-operator on envtest (real kube-apiserver + etcd) and every deploy/ overlay rendered and dry-run
	@$(MAKE) --no-print-directory cluster-binaries
	@echo "==> hpp-operator envtest (reconciler, webhook, deploy overlays; full log: _output/operator-envtest.log)"
	@mkdir -p $(ROOT)/_output; cd $(ROOT)/cmd/hpp-operator; rc=0; \
	  $(call tier_env,$@) go test -count=1 -v $(call tier_pkgs,$@) > $(ROOT)/_output/operator-envtest.log 2>&1 || rc=$$?; \
	  grep -E '^(--- |ok|FAIL|panic)|steady-state reconcile|accepted by kube-apiserver' $(ROOT)/_output/operator-envtest.log || true; \
	  $(ROOT)/hack/tier-count.sh $@ $(ROOT)/_output/operator-envtest.log || { [ $$rc != 0 ] || rc=1; }; \
	  exit $$rc

.PHONY: operator-on-node
operator-on-node: ## deploy/ overlays (csi-only, legacy, operator + CRs) applied for real on the local cluster's node, as pods (root)
ifeq ($(IS_ROOT),yes)
	@$(MAKE) --no-print-directory deps cluster-binaries
	@echo "==> hpp installed from deploy/ on the real node (logs of a failure: _output/onnode-logs/)"
	@cd $(ROOT)/test && $(call tier_env,$@) HPP_ONNODE_LOGS=$(ROOT)/_output/onnode-logs \
	  HPP_TIER_NAME=$@ HPP_TIER_LOG=$(ROOT)/_output/onnode.log $(GOTEST_TIER) -count=1 -timeout 30m -v $(call tier_pkgs,$@)
else ifeq ($(CI),true)
	@echo "==> operator-on-node FAILED: CI=true and the local cluster needs root" >&2; exit 1
else
	@echo "==> operator-on-node SKIPPED: the local cluster needs root (kubelet, containerd, mounts)"
endif
