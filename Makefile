# hpp — see README.md. `make help` lists the targets.
#
# Everything a target needs (Go modules, Debian packages, cluster binaries) is
# installed or built by the target itself; built cluster binaries are cached
# under $(HPP_CACHE) by version so a warm run skips the cold build.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
ROOT         := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BIN          := $(ROOT)/bin
HPP_CACHE    ?= $(HOME)/.cache/hpp
VERSION      ?= $(shell git -C $(ROOT) describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT       ?= $(shell git -C $(ROOT) rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS      := -X github.com/hostpath-provisioner/hpp/internal/version.Version=$(VERSION) \
                -X github.com/hostpath-provisioner/hpp/internal/version.Commit=$(COMMIT)
COMPONENTS   := hpp-csi hpp-legacy hpp-operator hpp-mounter hpp-migrate
# The parts of the one Go module (go.mod): every package is in one of them
# (test/layout checks it), and `make unit` counts each as a tier of its own.
PARTS        := internal $(addprefix cmd/,$(COMPONENTS)) test
# go test through gotestsum: every skip is listed with its reason at the end.
GOTEST       := $(ROOT)/hack/gotest.sh
GOTEST_TIER  := $(ROOT)/hack/gotest-tier.sh
# Brief by default so `make test` stays within CI's budget; raise by hand.
FUZZTIME     ?= 10s
IS_ROOT      := $(shell [ "$$(id -u)" = 0 ] && echo yes)
export HPP_CACHE
# One build configuration for every go command of make test but the -race
# ones (hack/gotest.sh turns cgo on for those, which -race needs): the
# binaries, go vet and golangci-lint, the tests of every tier, the quota
# VM's static builds and the generators. Each configuration compiles
# client-go, controller-runtime and gRPC anew (about 6 min each on a
# fresh machine here), and CGO_ENABLED=0 with cgo's default beside it, or
# -trimpath beside none, were two of them. No -trimpath for that reason:
# several tests find the repository from runtime.Caller's file path, which
# -trimpath cuts; the Dockerfile keeps it for the images.
export CGO_ENABLED := 0

# The test map, test/tiers.txt, declares each tier once; the rules take a
# tier's packages and environment (its HPP_TEST_TIER gate) from it, and
# `make lint` (hack/tiermap.sh check) fails where a rule disagrees.
TIERMAP      := $(ROOT)/hack/tiermap.sh
tier_pkgs     = $(shell $(TIERMAP) get $(1) pkgs)
tier_env      = $(shell $(TIERMAP) get $(1) env)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST) | sort

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p $(BIN)
	@for c in $(COMPONENTS); do \
	  echo "==> building $$c"; \
	  (cd $(ROOT)/cmd/$$c && go build -ldflags "$(LDFLAGS)" -o $(BIN)/$$c .); \
	done

.PHONY: build-standalone
build-standalone: ## build each component from go.mod, go.sum, internal/ and its cmd/ directory alone, as the Dockerfile does
	@$(ROOT)/hack/build-standalone.sh $(COMPONENTS)

.PHONY: deps
deps: ## install the Debian packages the tests need (root; skipped when present)
	@$(ROOT)/hack/install-deps.sh

# Of the test module, unit runs the harness packages the map gives
# unit:test; its other packages are tiers of their own (test/tiers.txt).
.PHONY: unit
unit: ## unit tests of every part (internal, each component, test's harness), with -race (root-only tests inside them skip without root; fail under CI=true)
	@# hpp-operator's envtests need kube-apiserver and etcd (cached after the first build).
	@$(ROOT)/hack/cluster-binaries.sh k8s etcd
	@for p in $(filter-out test,$(PARTS)); do \
	  echo "==> go test -race ./$$p/..."; \
	  (cd $(ROOT) && HPP_TIER_NAME=unit:$$p $(GOTEST) -race -count=1 ./$$p/...); \
	done
	@echo "==> go test -race test (harness packages)"
	@cd $(ROOT)/test && HPP_TIER_NAME=unit:test $(GOTEST) -race -count=1 $(call tier_pkgs,unit:test)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each
	@$(ROOT)/hack/fuzz.sh $(FUZZTIME)

# make test runs the two halves as tiers of their own: generate-check
# first, lint-go in a lane beside the cluster tiers (test/tiers.txt).
.PHONY: lint
lint: generate-check lint-go ## generated files current (generate-check), then lint-go

.PHONY: lint-go
lint-go: ## golangci-lint (pinned, tools/), go vet, gofmt, go mod tidy, committed files, skips, the test map
	@$(ROOT)/hack/lint.sh

include $(wildcard $(ROOT)/mk/*.mk)

# `make test`'s tiers, in the order of test/tiers.txt; HPP_CONFORMANCE=0
# leaves conformance out. hack/run-tiers.sh runs them one after the other
# (a recipe, not prerequisites, so that it can time each tier and print the
# table at the end, or what ran when one fails).
TEST_TIERS = $(filter-out $(if $(filter 0,$(HPP_CONFORMANCE)),conformance conformance-binaries),$(shell $(TIERMAP) tiers))

.PHONY: test
test: ## everything that can run on this machine (what CI runs), with each tier's time at the end
	@$(ROOT)/hack/run-tiers.sh $(MAKE) $(TEST_TIERS)

.PHONY: images
images: ## a container image per component (needs an image builder)
	@$(ROOT)/hack/images.sh $(COMPONENTS)

.PHONY: clean
clean: ## remove bin/ and test output (not the cached cluster binaries)
	rm -rf $(BIN) $(ROOT)/_output
