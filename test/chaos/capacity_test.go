package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/chaos/probes"
	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// capacityFollows is the bound: the capacity objects equal what
// the pools hold within 60 s.
const capacityFollows = 60 * time.Second

// checkCapacity, once the faults are over: the small pool's published
// capacity equals its free bytes, then follows a 64 MiB change each way
// within capacityFollows. Equality alone could hold by chance after a
// run; following a change shows the whole chain (hpp-csi's GetCapacity,
// csi-provisioner's capacity controller, the API server) still works
// after everything was killed around it. Only the tmpfs pool is checked:
// the other pools share the host's disk, whose free space other work on
// the machine moves.
func (r *run) checkCapacity(ctx context.Context) {
	pool := r.poolPaths[poolFull]
	if err := r.capacityMatches(ctx, pool, "after the run"); err != nil {
		r.violation("%v", err)
		return
	}
	path := filepath.Join(pool, "chaos-capacity-probe")
	f, err := os.Create(path)
	if err != nil {
		r.violation("capacity probe: %v", err)
		return
	}
	defer func() { _ = os.Remove(path) }()
	err = unix.Fallocate(int(f.Fd()), 0, 0, 64<<20)
	_ = f.Close()
	if err != nil {
		r.violation("capacity probe: fallocate 64 MiB in %s: %v", path, err)
		return
	}
	start := time.Now()
	if err := r.capacityMatches(ctx, pool, "with 64 MiB more used"); err != nil {
		r.violation("%v", err)
		return
	}
	if err := os.Remove(path); err != nil {
		r.violation("capacity probe: %v", err)
		return
	}
	used := time.Since(start)
	start = time.Now()
	if err := r.capacityMatches(ctx, pool, "with the 64 MiB freed"); err != nil {
		r.violation("%v", err)
		return
	}
	r.t.Logf("pool %s's published capacity followed 64 MiB used in %v and freed in %v (bound %v)",
		poolFull, used.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), capacityFollows)
}

// capacityMatches polls until the small pool's CSIStorageCapacity on the
// real node equals the pool's free bytes, for at most capacityFollows.
func (r *run) capacityMatches(ctx context.Context, pool, when string) error {
	what := fmt.Sprintf("pool %s %s", poolFull, when)
	var last error
	err := kit.PollEvery(ctx, capacityFollows, time.Second, what+": capacity published", func(ctx context.Context) (bool, string, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(pool, &st); err != nil {
			return false, "", err
		}
		published, err := r.publishedCapacity(ctx)
		if err != nil {
			return false, err.Error(), kit.Retry(err)
		}
		last = probes.CheckCapacity(what, published, int64(st.Bavail)*st.Bsize)
		return last == nil, fmt.Sprint(last), nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (within %v)", last, capacityFollows)
	}
	return err
}

// publishedCapacity is the capacity csi-provisioner published for the
// small pool's class on the real node; nil when there is none.
func (r *run) publishedCapacity(ctx context.Context) (*int64, error) {
	list, err := r.env.C.Client.StorageV1().CSIStorageCapacities(cluster.CSINamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	node := r.env.C.RealNode().Name
	var found *int64
	for _, c := range list.Items {
		if c.StorageClassName != className(poolFull) || c.NodeTopology == nil || c.NodeTopology.MatchLabels[contract.TopologyKey] != node {
			continue
		}
		if found != nil {
			return nil, errors.New("two CSIStorageCapacity objects for one class and node")
		}
		if c.Capacity != nil {
			v := c.Capacity.Value()
			found = &v
		}
	}
	return found, nil
}
