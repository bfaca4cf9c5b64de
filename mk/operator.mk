# hpp-operator and deploy/: code generation and the envtest tier (the
# reconciler, the webhook and every kustomize overlay against the real
# kube-apiserver and etcd that cluster-binaries builds; no root needed).

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
	  CI=true go test -count=1 -v ./controller/... ./webhook/ ./deploytest/ > $(ROOT)/_output/operator-envtest.log 2>&1 || rc=$$?; \
	  grep -E '^(--- |ok|FAIL|panic)|steady-state reconcile|accepted by kube-apiserver' $(ROOT)/_output/operator-envtest.log || true; \
	  $(ROOT)/hack/tier-count.sh $@ $(ROOT)/_output/operator-envtest.log || { [ $$rc != 0 ] || rc=1; }; \
	  exit $$rc

# Part of CI: stale generated files fail lint; the envtest tier runs with
# the other tests.
lint: generate-check
test: operator-envtest
