package onnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// The operator benchmark (issue 11): on the real node, with the operator
// installed from deploy/overlays/operator as in the on-node test, it
// measures over several rounds the seconds from a CR's creation until
// every node pod is Ready and the driver registered with kubelet, and from
// its deletion until everything the operator made is gone; then the API
// requests the operator makes per steady-state reconcile, counted in
// kube-apiserver's audit log. It reports; it asserts no timing. `make
// bench` runs it (HPP_TEST_TIER=bench-operator, root).

// operatorSA is the operator's ServiceAccount user, as the audit log names it.
const operatorSA = "system:serviceaccount:" + namespace + ":" + operatorName

// benchRound is one create → Ready → delete → gone cycle.
type benchRound struct {
	// ReadySeconds: CR created → the CSI DaemonSet's pod Ready on every
	// node it should run on and the driver on the node's CSINode.
	ReadySeconds float64 `json:"readySeconds"`
	// AvailableSeconds: CR created → its Available condition True.
	AvailableSeconds float64 `json:"availableSeconds"`
	// GoneSeconds: CR deleted → the CR and every object and pod the
	// operator made gone.
	GoneSeconds float64 `json:"goneSeconds"`
}

// steadyState is the operator's API traffic while nothing changes but
// reconciles are forced.
type steadyState struct {
	Reconciles int `json:"reconciles"`
	// Reads are get and list requests; Writes every other verb except
	// watch. Leader election's Lease renewals are counted apart: they are
	// the manager's, not the reconciler's, and happen on a timer.
	Reads       int     `json:"reads"`
	Writes      int     `json:"writes"`
	Watches     int     `json:"watches"`
	LeaseWrites int     `json:"leaseWrites"`
	WindowSecs  float64 `json:"windowSeconds"`
	// WritesByRequest names each write, to make a non-zero figure actionable.
	WritesByRequest map[string]int `json:"writesByRequest,omitempty"`
}

// benchReport is the benchmark's JSON.
type benchReport struct {
	Rounds      []benchRound `json:"rounds"`
	ReadyP50    float64      `json:"readyP50Seconds"`
	ReadyMax    float64      `json:"readyMaxSeconds"`
	AvailP50    float64      `json:"availableP50Seconds"`
	AvailMax    float64      `json:"availableMaxSeconds"`
	GoneP50     float64      `json:"goneP50Seconds"`
	GoneMax     float64      `json:"goneMaxSeconds"`
	SteadyState steadyState  `json:"steadyState"`
}

func TestOperatorBenchmark(t *testing.T) {
	// The gate's value is written out: hack/tiermap.sh check (make lint)
	// finds it and matches it with the map's bench-e2e (test/tiers.txt).
	if tier := os.Getenv("HPP_TEST_TIER"); tier != "bench-operator" {
		t.Skipf("runs with `make bench` (HPP_TEST_TIER=bench-operator), this is tier %q", tier)
	}
	if os.Geteuid() != 0 {
		testutil.MissingPrerequisite(t, "the local cluster needs root (kubelet, containerd, mounts)")
	}
	rounds := 5
	if s := os.Getenv("HPP_BENCH_OPERATOR_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("HPP_BENCH_OPERATOR_ROUNDS %q: want a positive number of rounds", s)
		}
		rounds = n
	}
	e := startOnNodeCluster(t)
	ctx := t.Context()
	e.apply(ctx, t, "overlay operator", e.render(ctx, t, "operator", ""))
	e.waitDeploymentAvailable(ctx, t, operatorName)

	pool := filepath.Join(e.pools, "bench")
	cr := crManifest(fmt.Sprintf("  storagePools:\n  - name: local\n    path: %s\n", pool))
	var report benchReport
	for i := range rounds {
		r := e.benchCreate(ctx, t, cr)
		r.GoneSeconds = e.benchDelete(ctx, t)
		t.Logf("round %d/%d: Ready %.2fs, Available %.2fs, gone %.2fs", i+1, rounds, r.ReadySeconds, r.AvailableSeconds, r.GoneSeconds)
		report.Rounds = append(report.Rounds, r)
	}
	// Steady state on a CR that stays.
	e.benchCreate(ctx, t, cr)
	report.SteadyState = e.measureSteadyState(ctx, t)
	report.summarize()
	report.print(t)
}

// benchPoll is the benchmark's polling interval: small next to the
// seconds it measures.
const benchPoll = 100 * time.Millisecond

// benchCreate applies the CR and times it to node pods Ready (and
// registered) and to Available.
func (e *env) benchCreate(ctx context.Context, t *testing.T, cr string) benchRound {
	t.Helper()
	// The clock starts at the create that succeeds: the first may find
	// the operator's webhook, which validates every CR, not serving yet.
	var start time.Time
	if err := kit.Poll(ctx, 2*time.Minute, "create HostPathProvisioner "+crName, func(ctx context.Context) (bool, string, error) {
		start = time.Now()
		if _, err := e.kubectl(ctx, cr, "create", "-f", "-"); err != nil {
			return false, "", kit.Retry(err)
		}
		return true, "", nil
	}); err != nil {
		t.Fatal(err)
	}
	var r benchRound
	node := e.c.RealNode().Name
	err := kit.PollEvery(ctx, 4*time.Minute, benchPoll, "node pods Ready and the CR Available", func(ctx context.Context) (bool, string, error) {
		if r.ReadySeconds == 0 {
			ready, why, err := e.nodePodsReady(ctx, node)
			if err != nil || !ready {
				return false, why, err
			}
			r.ReadySeconds = secondsSince(start)
		}
		cr, err := e.getCR(ctx)
		if err != nil {
			return false, "", kit.Retry(err)
		}
		if !available(cr) {
			return false, fmt.Sprintf("conditions %+v", cr.Status.Conditions), nil
		}
		r.AvailableSeconds = secondsSince(start)
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("%v\ninstall: %s", err, e.podStates(ctx))
	}
	return r
}

// nodePodsReady: the CSI DaemonSet is rolled out and Ready on every node
// it should run on, and kubelet lists the driver on node's CSINode.
func (e *env) nodePodsReady(ctx context.Context, node string) (bool, string, error) {
	ds, err := e.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, csiDaemonSet, metav1.GetOptions{})
	if err != nil {
		return false, "", kit.Retry(err)
	}
	s := ds.Status
	if s.ObservedGeneration != ds.Generation || s.DesiredNumberScheduled == 0 ||
		s.NumberReady != s.DesiredNumberScheduled || s.UpdatedNumberScheduled != s.DesiredNumberScheduled {
		return false, fmt.Sprintf("DaemonSet %s: %d of %d ready", csiDaemonSet, s.NumberReady, s.DesiredNumberScheduled), nil
	}
	cn, err := e.c.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false, "", kit.Retry(err)
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == contract.DriverName {
			return true, "", nil
		}
	}
	return false, "driver not registered on CSINode " + node, nil
}

// benchDelete deletes the CR and times it until the CR, the CSI
// DaemonSet and its node pods are gone (then checks that no other object
// the operator made is left).
func (e *env) benchDelete(ctx context.Context, t *testing.T) float64 {
	t.Helper()
	nodePods := e.daemonSetPods(ctx, t, csiDaemonSet)
	start := time.Now()
	if _, err := e.kubectl(ctx, "", "delete", "hostpathprovisioner/"+crName, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	err := kit.PollEvery(ctx, 4*time.Minute, benchPoll, "the CR, the CSI DaemonSet and its pods gone", func(ctx context.Context) (bool, string, error) {
		_, crErr := e.getCR(ctx)
		_, dsErr := e.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, csiDaemonSet, metav1.GetOptions{})
		errs := map[string]error{"hostpathprovisioner/" + crName: crErr, "daemonset/" + csiDaemonSet: dsErr}
		for _, name := range nodePods {
			_, errs["pod/"+name] = e.c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		}
		var left []string
		for what, err := range errs {
			switch {
			case err == nil:
				left = append(left, what)
			case !apierrors.IsNotFound(err):
				return false, "", kit.Retry(err)
			}
		}
		sort.Strings(left)
		return len(left) == 0, strings.Join(left, " "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	gone := secondsSince(start)
	// The finalizer deletes the rest before it lets the CR go: check.
	if left := e.operatorObjects(ctx, t); len(left) > 0 {
		t.Fatalf("the CR is gone but the operator's objects are not: %v", left)
	}
	return gone
}

// daemonSetPods names the pods of a DaemonSet of the install namespace.
func (e *env) daemonSetPods(ctx context.Context, t *testing.T, name string) []string {
	t.Helper()
	ds, err := e.c.Client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// available tells whether the CR's Available condition is True.
func available(cr *hppv1.HostPathProvisioner) bool {
	for _, c := range cr.Status.Conditions {
		if c.Type == hppv1.ConditionAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// getCR reads the HostPathProvisioner through the REST client: quicker
// than a kubectl per poll.
func (e *env) getCR(ctx context.Context) (*hppv1.HostPathProvisioner, error) {
	data, err := e.c.Client.Discovery().RESTClient().Get().
		AbsPath("/apis", hppv1.GroupVersion.Group, hppv1.GroupVersion.Version, "hostpathprovisioners", crName).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	cr := &hppv1.HostPathProvisioner{}
	return cr, json.Unmarshal(data, cr)
}

// Steady-state window: after the CR settled, forcedReconciles annotation
// changes (each an update event of the CR, so a reconcile), spaced so
// each reconcile ends before the next begins.
const (
	settle           = 10 * time.Second
	forcedReconciles = 10
	forceEvery       = time.Second
)

// measureSteadyState counts the operator's requests in the audit log over
// a window with forced reconciles, and the reconciles from its metrics.
func (e *env) measureSteadyState(ctx context.Context, t *testing.T) steadyState {
	t.Helper()
	time.Sleep(settle)
	before := e.operatorReconciles(ctx, t)
	from := time.Now()
	for i := range forcedReconciles {
		if _, err := e.kubectl(ctx, "", "annotate", "--overwrite", "hostpathprovisioner/"+crName, "bench.hpp.io/touch="+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(forceEvery)
	}
	// The last reconcile's requests, and the audit log's blocking writes.
	time.Sleep(2 * time.Second)
	to := time.Now()
	after := e.operatorReconciles(ctx, t)
	st := countOperatorRequests(t, e.c.AuditLogPath(), from, to)
	st.Reconciles = after - before
	st.WindowSecs = to.Sub(from).Seconds()
	return st
}

// operatorReconciles reads controller_runtime_reconcile_total (every
// controller, every result) from the operator pod's metrics endpoint,
// which this machine reaches at the pod IP (PodNetwork).
func (e *env) operatorReconciles(ctx context.Context, t *testing.T) int {
	t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + operatorName})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("operator pod: %v (%d pods)", err, len(pods.Items))
	}
	url := "https://" + pods.Items[0].Status.PodIP + ":8443/metrics"
	families, err := scrapeMetrics(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	if f, ok := families["controller_runtime_reconcile_total"]; ok {
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	} else {
		t.Fatalf("%s: no controller_runtime_reconcile_total", url)
	}
	return int(total)
}

// countOperatorRequests reads the operator's requests whose response
// completed within [from, to] from the audit log.
func countOperatorRequests(t *testing.T, path string, from, to time.Time) steadyState {
	t.Helper()
	st := steadyState{WritesByRequest: map[string]int{}}
	err := cluster.ReadAuditLog(path, func(ev *cluster.AuditEvent) {
		at := ev.StageTimestamp.Time
		if ev.User.Username != operatorSA || ev.Stage != "ResponseComplete" || at.Before(from) || at.After(to) {
			return
		}
		switch ev.Verb {
		case "get", "list":
			st.Reads++
		case "watch":
			st.Watches++
		default:
			if ev.ObjectRef.Resource == "leases" {
				st.LeaseWrites++
				return
			}
			st.Writes++
			st.WritesByRequest[ev.Verb+" "+ev.RequestURI]++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// secondsSince is the time since start in seconds, to the millisecond
// (the polling interval is 100 ms: finer digits mean nothing).
func secondsSince(start time.Time) float64 {
	return time.Since(start).Round(time.Millisecond).Seconds()
}

// summarize fills the percentiles.
func (r *benchReport) summarize() {
	var ready, avail, gone []float64
	for _, x := range r.Rounds {
		ready = append(ready, x.ReadySeconds)
		avail = append(avail, x.AvailableSeconds)
		gone = append(gone, x.GoneSeconds)
	}
	r.ReadyP50, r.ReadyMax = p50Max(ready)
	r.AvailP50, r.AvailMax = p50Max(avail)
	r.GoneP50, r.GoneMax = p50Max(gone)
}

// p50Max returns the median (the lower middle of an even count) and the
// maximum, rounded to 10 ms.
func p50Max(xs []float64) (p50, maxV float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	round := func(v float64) float64 { return float64(int(v*100+0.5)) / 100 }
	return round(s[(len(s)-1)/2]), round(s[len(s)-1])
}

// print writes the table and the JSON to stdout, where `make bench`
// shows them.
func (r *benchReport) print(t *testing.T) {
	t.Helper()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\n==> hpp-operator benchmark (%d rounds, one real node)\n", len(r.Rounds))
	fmt.Fprintln(w, "measure\tp50 s\tmax s\trounds")
	fmt.Fprintf(w, "CR created -> node pods Ready + registered\t%.2f\t%.2f\t%d\n", r.ReadyP50, r.ReadyMax, len(r.Rounds))
	fmt.Fprintf(w, "CR created -> Available\t%.2f\t%.2f\t%d\n", r.AvailP50, r.AvailMax, len(r.Rounds))
	fmt.Fprintf(w, "CR deleted -> everything gone\t%.2f\t%.2f\t%d\n", r.GoneP50, r.GoneMax, len(r.Rounds))
	s := r.SteadyState
	fmt.Fprintf(w, "\nsteady state (%.0f s window, %d forced reconciles seen)\treads\twrites\twatches\tlease renewals\n", s.WindowSecs, s.Reconciles)
	fmt.Fprintf(w, "operator API requests, total\t%d\t%d\t%d\t%d\n", s.Reads, s.Writes, s.Watches, s.LeaseWrites)
	if s.Reconciles > 0 {
		fmt.Fprintf(w, "per reconcile\t%.2f\t%.2f\t\t\n", float64(s.Reads)/float64(s.Reconciles), float64(s.Writes)/float64(s.Reconciles))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for req, n := range s.WritesByRequest {
		fmt.Printf("    steady-state write %dx %s\n", n, req)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s\n", data)
}
