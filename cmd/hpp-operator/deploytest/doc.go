// Package deploytest renders every kustomize overlay under deploy/ with the
// kustomize API and checks what breaks installs; with the harness's real
// kube-apiserver it also applies each with server-side dry-run. It has no
// code of its own: everything is in its tests.
package deploytest
