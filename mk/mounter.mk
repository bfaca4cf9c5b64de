# hpp-mounter's root tier (real loop devices, XFS, ext4, bind mounts).
# Without root the tests skip with the reason, or fail under CI=true.
# Packages from test/tiers.txt.

.PHONY: mounter-tests
mounter-tests: ## hpp-mounter node tests (real loop devices, XFS, ext4, bind mounts found from mountinfo), with -race (root)
	@echo "==> hpp-mounter node tests (-race)"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -race -count=1 $(call tier_pkgs,$@)
