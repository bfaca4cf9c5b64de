package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// BenchmarkMigrate1000 migrates 1,000 legacy PVs bound to claims against
// the real API server and PV controller (default 15 s claim resync) with
// hpp-migrate's default flags, and reports the wall time of the run (the
// target is under 60 s on this machine) and the API requests per PV that
// hpp-migrate itself made. One run per invocation: -benchtime=1x.
//
//	cd test && go test -run '^$' -bench Migrate1000 -benchtime 1x ./migrate
func BenchmarkMigrate1000(b *testing.B) {
	n := 1000
	if v := os.Getenv("HPP_BENCH_PVS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	cp := startControlPlane(b, binaries(b), 15*time.Second)
	c := cp.client
	const ns = "vms"
	setupCluster(b, c, ns)
	makeLegacyVolumes(b, c, ns, n)
	backupDir := filepath.Join(b.TempDir(), "backup")
	args := []string{"migrate", "--backup-dir", backupDir}
	if v := os.Getenv("HPP_BENCH_ARGS"); v != "" {
		args = append(args, strings.Fields(v)...)
	}
	phases := recordPhases(b, c, ns)
	b.ResetTimer()
	started := time.Now()
	res := hppMigrate(b, cp, "", args...)
	took := time.Since(started)
	b.StopTimer()
	if res.code != 0 || !strings.Contains(res.stdout, fmt.Sprintf("%d migrated", n)) {
		b.Fatalf("migrate: %s", tail(res.String(), 3000))
	}
	m := regexp.MustCompile(`(\d+) API requests`).FindStringSubmatch(res.stdout)
	if m == nil {
		b.Fatalf("no request count in the summary: %s", tail(res.stdout, 500))
	}
	requests, _ := strconv.Atoi(m[1])
	claims, err := c.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	bound, nudged := 0, 0
	for _, cl := range claims.Items {
		if cl.Status.Phase == corev1.ClaimBound {
			bound++
		}
		if cl.Annotations[contract.AnnRebind] != "" {
			nudged++
		}
	}
	if bound != n {
		b.Errorf("%d of %d claims Bound after migration", bound, n)
	}
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(float64(requests)/float64(n), "requests/PV")
	b.ReportMetric(float64(nudged), "claims-rebound")
	notBound := phases.notBound()
	b.ReportMetric(float64(len(notBound)), "claim-not-Bound-events")
	b.Logf("%d PVs migrated in %s (target < 60 s), %d API requests = %.1f per PV; claims seen not Bound: %d, rebound by hpp-migrate: %d; args %q",
		n, took.Round(time.Millisecond), requests, float64(requests)/float64(n), len(notBound), nudged, args)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// makeLegacyVolumes creates n claims and their legacy PVs with 16 workers
// and waits until all are Bound.
func makeLegacyVolumes(b *testing.B, c kubernetes.Interface, ns string, n int) {
	ctx := context.Background()
	sc := "hostpath"
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("disk-%04d", i)
				pvName := fmt.Sprintf("pvc-%08d-1111-2222-3333-444444444444", i)
				claim, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &sc, VolumeName: pvName,
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					continue
				}
				if _, err := c.CoreV1().PersistentVolumes().Create(ctx, legacyPVObject(ns, claim, pvName, i%2 == 1), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	waitBoundWithin(b, c, ns, n, 10*time.Minute)
}
