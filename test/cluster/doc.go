// Package cluster runs a real Kubernetes cluster on this machine for
// tests, benchmarks and `make demo`: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler on 127.0.0.1, one real node
// (Debian's containerd and runc, kubelet) where pods run, and optional
// simulated nodes (Node objects the harness keeps Ready) for multi-node
// scheduling. Everything lives in one temporary directory: PKI generated
// in Go, free loopback ports, kubeconfigs, per-component logs, locally
// built images (pause, busybox) imported into containerd.
//
// Binaries come from `make cluster-binaries` (BinariesFromCache). The
// caller must be root. One cluster runs per machine at a time (a lock
// file serialises them); Start sweeps what a killed earlier run left, and
// Stop leaves no process, mount, loop device, bridge or iptables chain.
//
// Typical use:
//
//	c, err := cluster.Start(ctx, cluster.Options{Binaries: cluster.BinariesFromCache(cache)})
//	if err != nil { ... }            // a *StepError naming the step, with a log tail
//	defer c.Stop(context.Background())
//	sim, err := c.AddSimulatedNode(ctx, "sim-1", cluster.SimulatedNodeOptions{})
//	p, err := sim.StartProcess(cluster.ProcessSpec{Name: "my-driver", Path: bin, Args: args})
//
// Processes started on a node get NODE_NAME and KUBECONFIG; their logs are
// in LogDir, and DumpLogTails/SaveLogs keep them for a failed test.
package cluster
