// Package migrate tests hpp-migrate against a real kube-apiserver, etcd and
// kube-controller-manager (whose PV binder reacts to every write, as in a
// cluster) started by the test from the harness's binary cache. No node
// runs: the legacy PVs are made as hpp-legacy makes them, and the part
// where a pod reads its file through hpp-csi after migration waits for
// hpp-csi to serve legacy directories (see cmd/hpp-migrate/README.md).
package migrate
