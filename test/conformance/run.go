package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hostpath-provisioner/hpp/test/cluster"
	"github.com/hostpath-provisioner/hpp/test/e2e/kit"
)

// Tools are the tier's binaries, built by
// `hack/cluster-binaries.sh conformance` from test/k8s-tools.
type Tools struct {
	E2ETest, Agnhost, Ginkgo string
}

// ToolsFromCache returns where hack/cluster-binaries.sh puts the tools
// ($HPP_CACHE/conformance/<k8s version>); check with Validate.
func ToolsFromCache(cache string) Tools {
	dir := filepath.Join(cache, "conformance", cluster.K8sVersion)
	return Tools{E2ETest: filepath.Join(dir, "e2e.test"), Agnhost: filepath.Join(dir, "agnhost"), Ginkgo: filepath.Join(dir, "ginkgo")}
}

// Validate reports every missing tool at once.
func (t Tools) Validate() error {
	var errs []error
	for field, p := range map[string]string{"E2ETest": t.E2ETest, "Agnhost": t.Agnhost, "Ginkgo": t.Ginkgo} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 || !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("conformance tools.%s %q: missing, relative or not executable (run `hack/cluster-binaries.sh conformance`)", field, p))
		}
	}
	return errors.Join(errs...)
}

// Options configure Run.
type Options struct {
	// Root is the checkout: the suite's --repo-root, where driver.yaml is.
	Root    string
	Cluster cluster.Binaries
	Tools   Tools
	// HPPCSI is the hpp-csi binary; built from cmd/hpp-csi when empty.
	HPPCSI string
	// OutputDir receives junit.xml, ginkgo.log, summary.txt and, after a
	// failure, cluster-logs/.
	OutputDir string
	// Procs is ginkgo's --procs; 4 when zero. Most of a storage test is
	// waiting on the cluster (pod starts, polls, grace periods), so on 2
	// cores 4 processes finish sooner: the suite took 8 min 41 s with 4
	// against 10 min 32 s with 2 (73 specs selected, 2026-11-29, the 4-way
	// run with other builds beside it). HPP_CONFORMANCE_PROCS overrides.
	Procs int
	// Timeout is ginkgo's --timeout for the whole suite; 50m when zero.
	Timeout time.Duration
	// Out receives progress and ginkgo's output; os.Stdout when nil.
	Out io.Writer
	// Snapshotter installs snapshots in the cluster (CRDs,
	// snapshot-controller, csi-snapshotter beside hpp-csi), so that the
	// driver file can declare snapshotDataSource with the cluster's
	// VolumeSnapshotClass; required (hack/cluster-binaries.sh builds it).
	Snapshotter cluster.Snapshotter
	// Narrow, when set, is a regular expression that selects a subset of
	// the tier's tests (e.g. "subPath" or "Ephemeral"), for working on one
	// failure; the full tier runs without it.
	Narrow string
}

func (o Options) withDefaults() Options {
	if o.Procs == 0 {
		o.Procs = 4
	}
	if o.Timeout == 0 {
		o.Timeout = 50 * time.Minute
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	return o
}

// Validate reports every problem at once, each naming its field.
func (o Options) Validate() error {
	var errs []error
	if !filepath.IsAbs(o.Root) {
		errs = append(errs, fmt.Errorf("options.Root %q: must be absolute", o.Root))
	} else {
		errs = append(errs, CheckDriverFile(o.Root, DriverFile))
		if _, err := LoadSkips(filepath.Join(o.Root, SkippedFile)); err != nil {
			errs = append(errs, err)
		}
	}
	if !filepath.IsAbs(o.OutputDir) {
		errs = append(errs, fmt.Errorf("options.OutputDir %q: must be absolute", o.OutputDir))
	}
	if o.Narrow != "" {
		if _, err := regexp.Compile(o.Narrow); err != nil {
			errs = append(errs, fmt.Errorf("options.Narrow %q: %w", o.Narrow, err))
		}
	}
	if o.Procs < 0 {
		errs = append(errs, fmt.Errorf("options.Procs %d: must not be negative", o.Procs))
	}
	errs = append(errs, o.Cluster.Validate(), o.Tools.Validate())
	return errors.Join(errs...)
}

// Run starts a local cluster with hpp-csi on its real node only (a
// simulated node would attract test pods that never start), imports the
// suite's images, runs the External Storage tests that Focus and the skip
// list select with ginkgo, and returns the JUnit report's summary. The
// error is non-nil when a spec failed or the suite did not finish; the
// cluster's logs are then saved in OutputDir/cluster-logs.
func Run(ctx context.Context, opts Options) (Summary, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return Summary{}, err
	}
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(opts.Out, "conformance %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	skips, err := LoadSkips(filepath.Join(opts.Root, SkippedFile))
	if err != nil {
		return Summary{}, err
	}
	if err := os.MkdirAll(opts.OutputDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("output dir: %w", err)
	}
	repoListFile := filepath.Join(opts.OutputDir, "repo-list.yaml")
	if err := os.WriteFile(repoListFile, []byte(repoList), 0o644); err != nil {
		return Summary{}, fmt.Errorf("repo list: %w", err)
	}
	env := append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoListFile)

	// Images first: a mismatch with the pinned suite fails before the
	// cluster costs anything.
	listed, err := runOutput(ctx, env, opts.Tools.E2ETest, "--list-images")
	if err != nil {
		return Summary{}, err
	}
	refs, err := neededImages(listed)
	if err != nil {
		return Summary{}, err
	}
	images, err := buildImages(ctx, refs, opts.Tools.Agnhost)
	if err != nil {
		return Summary{}, err
	}

	hpp, err := kit.Setup(ctx, kit.SetupOptions{Binaries: opts.Cluster, HPPCSI: opts.HPPCSI, Logf: logf, HandleSignals: true,
		Snapshotter: &opts.Snapshotter})
	if err != nil {
		return Summary{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if err := hpp.Stop(stopCtx); err != nil {
			logf("teardown: %v", err)
		}
	}()
	for _, img := range images {
		if err := hpp.C.ImportImage(ctx, img); err != nil {
			return Summary{}, fmt.Errorf("import image %s: %w", img.Ref, err)
		}
		logf("image %s imported", img.Ref)
	}

	junit := filepath.Join(opts.OutputDir, "junit.xml")
	_ = os.Remove(junit) // a stale report must not pass for this run's
	runErr := runGinkgo(ctx, opts, env, hpp.C, SkipRegexp(skips), logf)
	sum, sumErr := ReadSummary(junit)
	if sumErr == nil {
		line := sum.Report()
		logf("%s\nreport: %s (whole run %s)", line, junit, time.Since(started).Round(time.Second))
		if err := os.WriteFile(filepath.Join(opts.OutputDir, "summary.txt"), []byte(line+"\n"), 0o644); err != nil {
			logf("summary file: %v", err)
		}
	}
	if err := errors.Join(runErr, sumErr); err != nil || sum.Failed > 0 || len(sum.Failures) > 0 {
		logsDir := filepath.Join(opts.OutputDir, "cluster-logs")
		if saveErr := hpp.C.SaveLogs(logsDir); saveErr != nil {
			logf("saving cluster logs: %v", saveErr)
		} else {
			logf("cluster logs saved in %s", logsDir)
		}
		if err == nil {
			err = fmt.Errorf("%d specs failed: %s", len(sum.Failures), strings.Join(sum.Failures, "; "))
		}
		return sum, err
	}
	return sum, nil
}

// runGinkgo runs e2e.test under the ginkgo CLI in opts.Procs processes,
// its output to opts.Out and OutputDir/ginkgo.log.
func runGinkgo(ctx context.Context, opts Options, env []string, c *cluster.Cluster, skip string, logf func(string, ...any)) error {
	args := []string{
		"run",
		"--procs=" + strconv.Itoa(opts.Procs),
		"--timeout=" + opts.Timeout.String(),
		"--focus=" + focus(opts.Narrow),
		"--skip=" + skip,
		"--output-dir=" + opts.OutputDir,
		"--junit-report=junit.xml",
		"--no-color",
		// One dot per spec that runs; the thousands that the focus leaves
		// out (and the suite's own skips) are counted in the summary.
		"--silence-skips",
		// A spec still running after 3 minutes (the longest take ~100 s)
		// gets a progress report saying where it waits.
		"--poll-progress-after=3m",
		opts.Tools.E2ETest,
		"--",
		"--kubeconfig=" + c.Kubeconfig,
		"--kubectl-path=" + opts.Cluster.Kubectl,
		"--repo-root=" + opts.Root,
		"--storage.testdriver=" + filepath.Join(opts.Root, DriverFile),
	}
	logPath := filepath.Join(opts.OutputDir, "ginkgo.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("ginkgo log: %w", err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(ctx, opts.Tools.Ginkgo, args...)
	cmd.Dir = opts.OutputDir
	cmd.Env = append(env, "KUBECONFIG="+c.Kubeconfig)
	out := io.MultiWriter(opts.Out, logFile)
	cmd.Stdout, cmd.Stderr = out, out
	// ginkgo ends its e2e.test processes itself when interrupted.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	logf("running %s %s (output also in %s)", opts.Tools.Ginkgo, strings.Join(args, " "), logPath)
	if err := cmd.Run(); err != nil {
		// The output above (and in the log) says what failed.
		return fmt.Errorf("ginkgo: %w (output in %s)", err, logPath)
	}
	return nil
}

// focus is the ginkgo --focus: the tier's Focus, narrowed to test names
// that also match narrow further on.
func focus(narrow string) string {
	if narrow == "" {
		return Focus
	}
	return Focus + ".*(?:" + narrow + ")"
}

// runOutput runs a short command and returns its stdout; the error carries
// the command and its stderr.
func runOutput(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
