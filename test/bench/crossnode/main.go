// Command crossnode is `make bench`'s cross-node clone benchmark (issue
// 28): on a local cluster, a golden image claim lives on a simulated node
// ("golden", its own hpp-csi and pool, the peer transport at 127.0.0.2);
// first one clone alone, its transfer timed against GNU tar piping the
// same tree between the same two directories; then N claims cloned from it
// at once, each with a pod on the real node that reads its copy back. It
// reports the time until all N are Bound and until every pod has read its
// copy, and the bytes the golden node sent (its hpp_peer_sent_bytes_total)
// for clones 2 to N, which the real node's clone cache should serve with
// nothing sent.
// Figures are printed as a table and as JSON; none is asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

func main() {
	binDir := flag.String("bin-dir", "", "directory with the hpp-csi binary (built from cmd/hpp-csi when empty)")
	n := flag.Int("n", 50, "claims cloned from the golden image at once")
	dataMiB := flag.Int("data-mib", 200, "MiB written in the golden image's 1 GiB sparse disk.img (a multiple of 4)")
	poolFS := flag.String("pool-fs", "xfs", "the real node's pool for the N clones: xfs (XFS with reflink on a loop device, as hpp-mounter makes of a disk: clones from the cache are reflinks) or host (the cluster directory's filesystem: copies where it has no reflink)")
	keepLogs := flag.String("keep-logs", "", "copy the cluster's logs (every component's) to this directory before it is removed")
	cpQPS := flag.Int("control-plane-qps", 200, "kube-controller-manager and kube-scheduler --kube-api-qps (burst twice that); 0 keeps their defaults")
	flag.Parse()
	if *n < 2 {
		fmt.Fprintf(os.Stderr, "crossnode: -n %d: at least 2 (the first transfer and the clones served from cache)\n", *n)
		os.Exit(2)
	}
	if *poolFS != "xfs" && *poolFS != "host" {
		fmt.Fprintf(os.Stderr, "crossnode: -pool-fs %q: xfs or host\n", *poolFS)
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "crossnode: needs root (it runs kubelet and containerd on this machine)")
		os.Exit(1)
	}
	bins, hppcsi := kit.BenchBinaries(*binDir)
	rep, err := run(context.Background(), bins, hppcsi, *n, *dataMiB, *cpQPS, *poolFS, *keepLogs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crossnode:", err)
		os.Exit(1)
	}
	rep.print()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "crossnode %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
