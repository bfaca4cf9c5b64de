# hpp-csi: the csi-sanity suite (real socket, real bind mounts; needs root).
.PHONY: sanity
sanity: ## kubernetes-csi sanity suite against hpp-csi (root)
	@echo "==> csi-sanity against hpp-csi"
	@cd $(ROOT)/test && go test -count=1 -v ./sanity/ 2>&1 | tail -40
