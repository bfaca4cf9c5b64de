# hpp-csi's root tiers: the csi-sanity suite (real socket, real bind
# mounts), the node and abuse tests. Without root the tests skip with the
# reason, or fail under CI=true. Packages from test/tiers.txt.
.PHONY: sanity
sanity: ## kubernetes-csi sanity suite against hpp-csi (root)
	@echo "==> csi-sanity against hpp-csi"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -count=1 $(call tier_pkgs,$@)

.PHONY: csi-tests
csi-tests: ## hpp-csi node tests (real mounts, tmpfs, XFS on loop) and abuse tests over the real socket, with -race (root)
	@echo "==> hpp-csi node and abuse tests (-race)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -race -count=1 $(call tier_pkgs,$@)
