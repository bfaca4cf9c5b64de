# hpp-csi: the csi-sanity suite (real socket, real bind mounts; needs root).
.PHONY: sanity
sanity: ## kubernetes-csi sanity suite against hpp-csi (root)
	@echo "==> csi-sanity against hpp-csi"
	@cd $(ROOT)/test && HPP_TIER_NAME=$@ $(GOTEST) -count=1 ./sanity/
