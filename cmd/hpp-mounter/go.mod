module github.com/hostpath-provisioner/hpp/cmd/hpp-mounter

go 1.26.0

require (
	github.com/hostpath-provisioner/hpp/internal v0.0.0
	github.com/moby/sys/mountinfo v0.7.2
	github.com/spf13/cobra v1.10.2
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)

// Per-component images are built module by module (GOWORK=off), so every
// cmd module points at the in-tree internal module itself.
replace github.com/hostpath-provisioner/hpp/internal => ../../internal
