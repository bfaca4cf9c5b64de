# The quota VM tier: node tests that need project quotas (XFS prjquota, ext4
# project quota), run as root inside a small VM (qemu under software
# emulation, Debian's kernel, a busybox initramfs) because the kernel this
# runs on may have no quota support (CONFIG_XFS_QUOTA off, no QFMT_V2).
# hack/quotavm.sh installs qemu and the tools, downloads the kernel and
# assembles the initramfs into $(HPP_CACHE)/quotavm/<kernel version>/ once.
# Test binaries are static (CGO_ENABLED=0): the VM emulates every
# instruction, and the runner copies a dynamic binary's libraries anyway.
QUOTAVM_OUT := $(ROOT)/_output/quotavm
# Test binaries run in the VM, in this order (one boot for all):
# the tier's self-check first, so a broken VM is told apart from a broken layer.
QUOTAVM_TESTS := $(QUOTAVM_OUT)/selfcheck.test

.PHONY: quota-vm-tests
quota-vm-tests: ## project-quota node tests (XFS, ext4 on loop devices) as root in a qemu VM with a quota-enabled kernel (cached in HPP_CACHE)
	@echo "==> quota VM tests: building the test binaries"
	@mkdir -p $(QUOTAVM_OUT)
	@cd $(ROOT)/test && CGO_ENABLED=0 go test -c -o $(QUOTAVM_OUT)/selfcheck.test ./quotavm/
	@echo "==> quota VM tests: running them in the VM (hack/quotavm.sh)"
	@$(ROOT)/hack/quotavm.sh $(QUOTAVM_TESTS)
