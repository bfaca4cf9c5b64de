// Package cluster runs a real Kubernetes cluster on this machine for
// tests, benchmarks and `make demo`: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on 127.0.0.1, one real node
// (Debian's containerd and runc, kubelet) where pods run, and optional
// simulated nodes (Node objects the harness keeps Ready) for multi-node
// scheduling. Everything lives in one temporary directory: PKI generated
// in Go, free loopback ports, kubeconfigs, per-component logs, locally
// built images (pause, busybox, or any static binary via BinaryImage)
// imported into containerd. The real node's containerd and kubelet run in
// their own PID and mount namespaces ("the node", PID 1 the harness's
// node-init) where kubelet's root also shows at /var/lib/kubelet, as
// privileged pods and e2e tools expect of a node; every other process
// (hpp-csi included) runs on the host, and its mounts under the cluster
// directory reach the node. See nodens_linux.go.
//
// Options.PodNetwork is for components installed as pods (an operator
// Deployment, a CSI DaemonSet's csi-provisioner): the bridge becomes the
// pods' gateway, kube-apiserver listens on the node IP, and kube-proxy
// (built with the other Kubernetes binaries) runs on the host in iptables
// mode. The node shares the host's network namespace, so its rules serve
// both pods with in-cluster configuration (the kubernetes Service) and
// kube-apiserver calling a webhook through its Service's ClusterIP. It is
// started with the flags that would change host sysctls turned off, and
// Stop runs `kube-proxy --cleanup` before sweeping KUBE- chains.
//
// Binaries come from `make cluster-binaries` (BinariesFromCache; a cache
// missing only kube-proxy gains it in about a minute, without rebuilding
// the rest). The
// caller must be root. One cluster runs per machine at a time (a lock
// file serialises them, so parallel test packages wait for each other);
// Start sweeps what a killed earlier run left, and Stop leaves no process,
// mount, loop device, cgroup, bridge or iptables chain. With
// Options.HandleSignals, SIGINT/SIGTERM tear down before the process exits.
//
// Typical use:
//
//	c, err := cluster.Start(ctx, cluster.Options{Binaries: cluster.BinariesFromCache(cache)})
//	if err != nil { ... }            // a *StepError naming the step, with a log tail
//	defer c.Stop(context.Background())
//
//	// A host process on the real node, with NODE_NAME and KUBECONFIG set;
//	// its log is <LogDir>/my-daemon@hpp-node.log.
//	p, err := c.RealNode().StartProcess(cluster.ProcessSpec{Name: "my-daemon", Path: bin, Args: args})
//
//	// A simulated node (labelled SimulatedLabel=true) with its own process.
//	sim, err := c.AddSimulatedNode(ctx, "sim-1", cluster.SimulatedNodeOptions{})
//	p, err = sim.StartProcess(cluster.ProcessSpec{Name: "my-daemon", Path: bin, RestartOnExit: true})
//	defer c.RemoveSimulatedNode(ctx, "sim-1")
//
// hpp-csi specifics: InstallCSIDriver creates the CSIDriver object as the
// operator does; Node.StartHPPCSI runs hpp-csi and csi-provisioner on a
// node (on the real node hpp-csi registers with kubelet itself);
// AddSimulatedCSINode adds a node with hpp-csi's topology label and
// CSINode entry. Processes with RestartOnExit come back a second after a
// crash or Process.Kill, as kubelet restarts a container; Stop ends them.
//
// A failed test should call DumpLogTails (and SaveLogs, since Stop removes
// the directory) before Stop.
package cluster
