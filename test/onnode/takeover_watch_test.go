package onnode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// timeline collects what happened when, printed at the end of the test.
type timeline struct {
	t     *testing.T
	start time.Time
	mu    sync.Mutex
	lines []string
}

func newTimeline(t *testing.T) *timeline { return &timeline{t: t, start: time.Now()} }

func (tl *timeline) mark(what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	line := fmt.Sprintf("%7.1fs  %s", time.Since(tl.start).Seconds(), what)
	tl.lines = append(tl.lines, line)
	tl.t.Log("timeline: " + line)
}

func (tl *timeline) print() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.t.Logf("timeline of the takeover (seconds since the cluster started):\n%s", strings.Join(tl.lines, "\n"))
}

// interval is a span during which something was missing.
type interval struct{ from, to time.Time }

func (i interval) String() string { return i.to.Sub(i.from).Round(time.Millisecond).String() }

// watchers poll, every 100 ms from the switch to the end: the node's
// CSINode entry for the driver, and every mount upstream's mounters made
// under the pvcTemplate pools' paths (the node's mountinfo). At each check
// the mounts must also be the very ones upstream's mounters made (same
// mount IDs): an unmount and mount again between two polls, or a mount
// stacked on top, would change them.
type watchers struct {
	mu        sync.Mutex
	absent    []interval // driver missing from CSINode
	missing   map[string][]interval
	checked   time.Time
	baseline  []string
	ids       map[string]string // mount point -> its mount IDs at the start
	mountIDs  func() (map[string]string, error)
	writerLog func() (string, error)
}

func (r *takeoverRun) startWatchers(ctx context.Context, t *testing.T) *watchers {
	t.Helper()
	w := &watchers{missing: map[string][]interval{}, checked: time.Now()}
	for _, p := range r.pools {
		if !p.template() {
			continue
		}
		m, err := r.mountsUnder(p.path)
		if err != nil || len(m) == 0 {
			t.Fatalf("no mount under %s (%v): upstream's mounters were waited for at install", p.path, err)
		}
		w.baseline = append(w.baseline, m...)
	}
	w.mountIDs = func() (map[string]string, error) { return r.mountIDs(w.baseline) }
	var err error
	if w.ids, err = w.mountIDs(); err != nil {
		t.Fatal(err)
	}
	t.Logf("watching CSINode %s and the pool mounts %v every 100 ms", r.c.RealNode().Name, w.baseline)
	node := r.c.RealNode().Name
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var since time.Time
		lost := map[string]time.Time{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := time.Now()
			cn, err := r.c.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
			if err == nil || ctx.Err() == nil {
				listed := err == nil && slices.ContainsFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == contract.DriverName })
				w.mu.Lock()
				switch {
				case !listed && since.IsZero():
					since = now
				case listed && !since.IsZero():
					w.absent = append(w.absent, interval{since, now})
					since = time.Time{}
				}
				w.mu.Unlock()
			}
			present := map[string]bool{}
			for _, p := range r.pools {
				m, err := r.mountsUnder(p.path)
				if err != nil {
					continue
				}
				for _, mp := range m {
					present[mp] = true
				}
			}
			w.mu.Lock()
			for _, mp := range w.baseline {
				switch {
				case !present[mp] && lost[mp].IsZero():
					lost[mp] = now
				case present[mp] && !lost[mp].IsZero():
					w.missing[mp] = append(w.missing[mp], interval{lost[mp], now})
					delete(lost, mp)
				}
			}
			// Open intervals count at a check too.
			for mp, from := range lost {
				w.missing[mp+" (still missing)"] = []interval{{from, now}}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// mountIDs maps each of the node's mount points in points to the IDs of
// the mounts there, bottom to top (mountinfo's first field).
func (r *takeoverRun) mountIDs(points []string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.c.NodeInitPID()), "mountinfo"))
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && slices.Contains(points, f[4]) {
			ids[f[4]] = strings.TrimPrefix(ids[f[4]]+","+f[0], ",")
		}
	}
	return ids, nil
}

// mountsUnder lists the node's mount points at or below dir.
func (r *takeoverRun) mountsUnder(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(r.c.NodeInitPID()), "mountinfo"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) && !slices.Contains(out, fields[4]) {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// maxDriverAbsence bounds each absence of the driver from CSINode while
// its node pod rolls: from the old pod's stop to the new pod's
// registration. What it guards is the old pod's 30 s grace waited out (31
// to 32 s before hpp-migrate's hurry.go). Issue 30's target, 5 s per
// phase, is a speed figure: the tier prints it for every phase (test/README
// keeps them) and does not assert it, because its floor is kubelet starting
// a pod on this shared 2-core machine: 1.0 to 4.3 s going to hpp on quiet
// runs, 5.2 s once on a fresh-clone make test (2026-12-07), 4.9 to 5.1 s
// for upstream's own four-container pod going back.
const maxDriverAbsence = 10 * time.Second

// check asserts the phase's watch results since the last check: at most
// one absence of the driver from CSINode (one restart of the node's
// plugin pod), no pool mount ever missing, and the writer's log without
// an error or a gap over 2 s.
func (w *watchers) check(t *testing.T, phase string) {
	t.Helper()
	w.mu.Lock()
	var absent []interval
	for _, a := range w.absent {
		if a.from.After(w.checked) {
			absent = append(absent, a)
		}
	}
	var missing []string
	for mp, ivs := range w.missing {
		for _, iv := range ivs {
			if iv.to.After(w.checked) {
				missing = append(missing, fmt.Sprintf("%s for %s", mp, iv))
			}
		}
	}
	w.checked = time.Now()
	w.mu.Unlock()
	t.Logf("%s: CSINode without %s: %d times %v", phase, contract.DriverName, len(absent), absent)
	if len(absent) > 1 {
		t.Errorf("%s: the driver left CSINode %d times (%v); want at most once (one plugin pod restart)", phase, len(absent), absent)
	}
	for _, a := range absent {
		// The roll shortens the old node pod's grace (hpp-migrate's
		// hurry.go): no new pod on the node waits half a minute for a
		// driver.
		if a.to.Sub(a.from) > maxDriverAbsence {
			t.Errorf("%s: the driver was missing from CSINode for %s, want at most %s", phase, a, maxDriverAbsence)
		}
	}
	ids, err := w.mountIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range w.baseline {
		if ids[mp] != w.ids[mp] {
			missing = append(missing, fmt.Sprintf("%s replaced: mount IDs %q, upstream's were %q", mp, ids[mp], w.ids[mp]))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%s: pool mounts missing from the node's mountinfo or replaced: %s", phase, strings.Join(missing, "; "))
	} else {
		t.Logf("%s: every pool mount %v present at every poll, the same mounts upstream's mounters made (mount IDs %v)", phase, w.baseline, w.ids)
	}
	if w.writerLog != nil {
		log, err := w.writerLog()
		if err != nil {
			t.Fatal(err)
		}
		lines, maxGap, errs := writerStats(log)
		t.Logf("%s: writer appended %d lines every 100 ms, largest gap %.2f s, %d write errors", phase, lines, maxGap, len(errs))
		if maxGap > 2 || len(errs) > 0 {
			t.Errorf("%s: writer: largest gap %.2f s (want at most 2), errors %v", phase, maxGap, errs)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// writerStats reads the writer's log: "<uptime> <n>" lines, or "write
// error ..." lines.
func writerStats(log string) (lines int, maxGap float64, errs []string) {
	prev := -1.0
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			errs = append(errs, l)
			continue
		}
		up, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			errs = append(errs, l)
			continue
		}
		lines++
		if prev >= 0 && up-prev > maxGap {
			maxGap = up - prev
		}
		prev = up
	}
	return lines, maxGap, errs
}

// writerPod appends "<uptime> <n>" to /data/log every 100 ms and reports a
// failed append on stdout.
const writerScript = `i=0; while true; do read up idle < /proc/uptime; if ! echo "$up $i" >> /data/log; then echo "write error at $up"; fi; i=$((i+1)); sleep 0.1; done`

// startWriter starts the pod that writes all along, on a claim in the
// long-named pvcTemplate pool (the one whose names upstream shortens).
func (r *takeoverRun) startWriter(ctx context.Context, t *testing.T) {
	t.Helper()
	p := r.pools[2]
	c := r.c.Client
	if _, err := c.CoreV1().PersistentVolumeClaims(appNamespace).Create(ctx, kit.PVC(appNamespace, "live", p.class, "10Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := kit.Pod(appNamespace, "writer", writerScript, kit.PodVolume{Name: "data", Claim: "live", Path: "/data"})
	if _, err := c.CoreV1().Pods(appNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kit.WaitPodPhase(ctx, c, appNamespace, "writer", corev1.PodRunning, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims(appNamespace).Get(ctx, "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(r.volumeDir(p, pv.Spec.CSI.VolumeHandle), "log")
	r.watch.writerLog = func() (string, error) {
		pod, err := c.CoreV1().Pods(appNamespace).Get(context.WithoutCancel(ctx), "writer", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].RestartCount != 0 {
			return "", fmt.Errorf("writer pod: %s; want Running, never restarted", kit.PodSummary(pod))
		}
		out, err := kit.PodLogs(context.WithoutCancel(ctx), c, appNamespace, "writer")
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return string(b) + out, nil
	}
	t.Logf("writer appending to %s every 100 ms", file)
}

// stopWriter checks the writer one last time and deletes it.
func (r *takeoverRun) stopWriter(ctx context.Context, t *testing.T) {
	t.Helper()
	r.watch.check(t, "writer's whole run")
	r.watch.writerLog = nil
	if err := r.c.Client.CoreV1().Pods(appNamespace).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitPodGone(ctx, t, appNamespace, "writer")
}

// commandDir holds the commands the README's sections run: hpp-migrate
// built from this checkout, and the cluster's kubectl.
func (r *takeoverRun) commandDir(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := kit.BuildCommand(ctx, "hpp-migrate", filepath.Join(dir, "hpp-migrate")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(r.bins.Kubectl, filepath.Join(dir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readmeSection is the first ```sh block under the heading "## <name>"
// or "### <name>" of deploy/README.md.
func readmeSection(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	in, fenced := false, false
	var block []string
	for _, l := range lines {
		switch {
		case fenced && strings.TrimSpace(l) == "```":
			return strings.Join(block, "\n")
		case fenced:
			block = append(block, l)
		case strings.HasPrefix(l, "#"):
			if in {
				t.Fatalf("deploy/README.md section %q has no ```sh block", name)
			}
			h := strings.TrimSpace(strings.TrimLeft(l, "#"))
			in = (strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "### ")) && h == name
		case in && strings.TrimSpace(l) == "```sh":
			fenced = true
		}
	}
	t.Fatalf("deploy/README.md: no section %q with a ```sh block", name)
	return ""
}

// runSection runs a README section's commands, verbatim, with bash from
// the checkout's root, kubectl and hpp-migrate on PATH, streaming their
// output into the test log.
func (r *takeoverRun) runSection(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := r.runScript(ctx, t, name, readmeSection(t, repoRoot(t), name), ""); err != nil {
		t.Fatalf("deploy/README.md %q: %v\ninstall: %s", name, err, r.podStates(ctx))
	}
	r.tl.mark(fmt.Sprintf("deploy/README.md %q: done", name))
}

// runSectionKilled runs a README section as runSection does and kills
// it, with SIGKILL to every process it started (a closed terminal, a
// dropped connection), as soon as a line of its output holds killAt.
func (r *takeoverRun) runSectionKilled(ctx context.Context, t *testing.T, name, killAt string) {
	t.Helper()
	err := r.runScript(ctx, t, name, readmeSection(t, repoRoot(t), name), killAt)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("deploy/README.md %q: not killed at %q: %v", name, killAt, err)
	}
	r.tl.mark(fmt.Sprintf("deploy/README.md %q: killed at %q", name, killAt))
}

func (r *takeoverRun) runScript(ctx context.Context, t *testing.T, name, script, killAt string) error {
	t.Helper()
	r.tl.mark(fmt.Sprintf("deploy/README.md %q: running\n%s", name, indent(script)))
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "PATH="+r.bin+":"+os.Getenv("PATH"), "KUBECONFIG="+r.c.Kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Logf("  | %s", sc.Text())
			if killAt != "" && strings.Contains(sc.Text(), killAt) && cmd.Process != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Logf("  | (killed: SIGKILL to the section's processes)")
			}
		}
	}()
	err := cmd.Run()
	_ = pw.Close()
	<-done
	return err
}

func indent(s string) string {
	return "           " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n           ")
}

// listItems decodes a kubectl -o json list.
func listItems(t *testing.T, doc string) []map[string]any {
	t.Helper()
	var l struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(doc), &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// upstreamOnly names an object (kind/namespace/name and managers) whose
// fields outside status are still owned by upstream's field managers, or
// returns "".
func upstreamOnly(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	mfs, _ := meta["managedFields"].([]any)
	var managers []string
	for _, m := range mfs {
		mf, _ := m.(map[string]any)
		name, _ := mf["manager"].(string)
		if sub, _ := mf["subresource"].(string); sub != "" {
			continue
		}
		if slices.Contains(upstreamManagers, name) {
			managers = append(managers, name)
		}
	}
	if len(managers) == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s/%s: fields owned by %v", o["kind"], meta["namespace"], meta["name"], managers)
}
