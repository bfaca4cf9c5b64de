module github.com/hostpath-provisioner/hpp/internal

go 1.26.0

require (
	github.com/opencontainers/selinux v1.15.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/cyphar/filepath-securejoin v0.5.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
