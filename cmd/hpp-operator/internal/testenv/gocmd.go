package testenv

import (
	"context"
	"os"
	"os/exec"
)

// GoCommand is `go ARGS...` run in dir with make test's one build
// configuration, CGO_ENABLED=0 (the Makefile says why). The unit tier runs
// these tests under -race, which needs cgo: hack/gotest.sh exports
// CGO_ENABLED=1, and a child go command inheriting it compiles its whole
// dependency graph (client-go, kustomize) a second time instead of reusing
// what generate-check and build compiled; on a fresh machine that was
// 3 minutes of the unit tier.
func GoCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
