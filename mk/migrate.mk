# hpp-migrate against a real control plane (test/migrate): etcd,
# kube-apiserver and kube-controller-manager from $(HPP_CACHE), started by
# the tests themselves on loopback ports (no node, no root needed). Through
# hack/gotest.sh: every skip listed with its reason, and the tests counted
# against test/tiers.txt, which gives the packages.

MIGRATE_BENCH_PVS ?= 1000

.PHONY: migrate-tests
migrate-tests: ## hpp-migrate on a real API server + PV controller: kill after every step, rollback, in-use, StorageClasses
	@$(MAKE) --no-print-directory cluster-binaries
	@echo "==> hpp-migrate tests (test/migrate)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -count=1 -timeout 20m $(call tier_pkgs,$@)

.PHONY: bench-migrate
bench-migrate: ## migrate MIGRATE_BENCH_PVS (1000) legacy PVs on a real API server: seconds and API requests per PV
	@$(MAKE) --no-print-directory cluster-binaries
	@cd $(ROOT)/test && HPP_BENCH_PVS=$(MIGRATE_BENCH_PVS) go test -count=1 -timeout 30m -run '^$$' -bench Migrate1000 -benchtime 1x -v ./migrate/
