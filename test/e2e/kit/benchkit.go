package kit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// Helpers the cluster benchmarks (test/e2e/bench, test/bench/legacy) share.

// WaitCapacity waits until nodes CSIStorageCapacity objects with room exist
// for class: before that the scheduler sees no room, and a benchmark would
// measure the capacity poll interval.
func WaitCapacity(ctx context.Context, c *cluster.Cluster, class string, nodes int) error {
	return Poll(ctx, 2*time.Minute, "capacity objects for every node", func(ctx context.Context) (bool, string, error) {
		list, err := c.Client.StorageV1().CSIStorageCapacities(cluster.CSINamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", Retry(err)
		}
		n := 0
		for _, cp := range list.Items {
			if cp.StorageClassName == class && cp.Capacity != nil && cp.Capacity.Value() > 0 {
				n++
			}
		}
		return n >= nodes, fmt.Sprintf("%d of %d", n, nodes), nil
	})
}

// Parallel calls fn(0..n-1) on width goroutines and returns every error.
func Parallel(n, width int, fn func(int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	next := make(chan int)
	for range width {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// Machine describes the host for a benchmark report.
func Machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return fmt.Sprintf("%d cores", strings.Count(string(b), "\nprocessor")+1)
}

// BenchBinaries are what a cluster benchmark run by hand starts: the
// cluster binaries of $HPP_CACHE (else the default cache) and the hpp-csi
// in binDir ("" when binDir is empty: Setup builds it from cmd/hpp-csi).
func BenchBinaries(binDir string) (bins cluster.Binaries, hppcsi string) {
	cache, _ := cluster.CacheDir()
	if binDir != "" {
		hppcsi = filepath.Join(binDir, "hpp-csi")
	}
	return cluster.BinariesFromCache(cache), hppcsi
}
