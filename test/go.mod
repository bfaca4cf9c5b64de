module github.com/hostpath-provisioner/hpp/test

go 1.26

require github.com/hostpath-provisioner/hpp/internal v0.0.0

replace github.com/hostpath-provisioner/hpp/internal => ../internal
