module github.com/hostpath-provisioner/hpp/cmd/hpp-csi

go 1.26

require github.com/hostpath-provisioner/hpp/internal v0.0.0

// Per-component images are built module by module (GOWORK=off), so every
// cmd module points at the in-tree internal module itself.
replace github.com/hostpath-provisioner/hpp/internal => ../../internal
