// Package migrate moves legacy hostPath PVs of kubevirt.io/hostpath-provisioner
// onto the CSI driver kubevirt.io.hostpath-provisioner in place: same PV
// name, same claim, same directory on the node. See ../README.md for the
// contract with hpp-csi and the order of API writes.
package migrate

// The names of the compatibility contract that hpp-migrate reads and writes
// (provisioner and driver names, annotations, volume attributes) are in
// internal/contract: they are stored in PVs that outlive this tool.

// FinalizerPVProtection is kube-controller-manager's PV protection
// finalizer: it stays on a Bound PV, so a replaced PV would never go.
const FinalizerPVProtection = "kubernetes.io/pv-protection"
