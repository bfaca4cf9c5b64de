package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

// envFailAfter is the failure-injection point for tests: "<step>" or
// "<step>:<pv>" makes the process exit with status 3 right after that
// step completes (for the first PV, or for that PV), as if it were killed.
const envFailAfter = "HPP_MIGRATE_FAIL_AFTER"

// environment is what main gives the commands: the process's streams and
// the parts of its environment they use.
type environment struct {
	failAfter      string
	stdout, stderr io.Writer
	exit           func(int)
	terminal       bool
	// failed is set when a run reports a failure (exit status 1).
	failed bool
}

// globalOptions are kubectl's connection flags plus the client's rate.
type globalOptions struct {
	kubeconfig string
	context    string
	qps        float32
	burst      int
	// requests counts the API requests made through client().
	requests atomic.Int64
}

func (g *globalOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the in-cluster service account)")
	fs.StringVar(&g.context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.Float32Var(&g.qps, "kube-api-qps", 200, "API requests per second (the API server's priority and fairness still applies)")
	fs.IntVar(&g.burst, "kube-api-burst", 400, "API request burst")
}

func (g *globalOptions) validate() []error {
	var errs []error
	if g.qps <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v: must be positive", g.qps))
	}
	if g.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst %d: must be at least 1", g.burst))
	}
	return errs
}

// clients returns the client (rate limited by --kube-api-qps/burst) and
// an unlimited one for the single create that ends a PV's gap.
func (g *globalOptions) clients() (limited, urgent kubernetes.Interface, err error) {
	cfg, err := g.config()
	if err != nil {
		return nil, nil, err
	}
	if limited, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	urgent, err = kubernetes.NewForConfig(cfg)
	return limited, urgent, err
}

// client is the rate-limited client alone.
func (g *globalOptions) client() (kubernetes.Interface, error) {
	c, _, err := g.clients()
	return c, err
}

// config loads the configuration as kubectl does: --kubeconfig, else the
// KUBECONFIG files, else ~/.kube/config, else the in-cluster account.
func (g *globalOptions) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = g.qps, g.burst
	cfg.UserAgent = "hpp-migrate"
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{rt: rt, n: &g.requests} })
	return cfg, nil
}

// countingTransport counts API requests, for the summary: the cost of a
// migration in requests per PV is what an API server operator asks about.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(req)
}

// planOptions select and describe the legacy PVs.
type planOptions struct {
	pvDir      string
	pool       string
	namespace  string
	node       string
	backupDir  string
	allowInUse bool
	names      []string
}

func (p *planOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&p.pvDir, "pv-dir", "", "the legacy provisioner's PV_DIR (default: the one directory all legacy PVs are in)")
	fs.StringVar(&p.pool, "storage-pool", "legacy", "hpp-csi pool whose legacyPath is PV_DIR")
	fs.StringVarP(&p.namespace, "namespace", "n", "", "only PVs bound to claims in this namespace")
	fs.StringVar(&p.node, "node", "", "only PVs on this node")
	fs.StringVar(&p.backupDir, "backup-dir", "hpp-migrate-backup", "directory of the PV backups (one <pv>.yaml each)")
	fs.BoolVar(&p.allowInUse, "allow-in-use", false, "also migrate PVs whose claims running pods use (they keep their hostPath mount until they restart)")
}

// validate checks the flags and the PV names (the arguments, set by runE).
func (p *planOptions) validate() []error {
	var errs []error
	if p.pvDir != "" && !filepath.IsAbs(p.pvDir) {
		errs = append(errs, fmt.Errorf("--pv-dir %q: must be an absolute path", p.pvDir))
	}
	if p.pool == "" {
		errs = append(errs, errors.New("--storage-pool: empty (the hpp-csi pool that serves the legacy directories)"))
	}
	if p.backupDir == "" {
		errs = append(errs, errors.New("--backup-dir: empty (the originals must be saved before anything changes)"))
	}
	for _, a := range p.names {
		if a == "" || strings.Contains(a, "/") {
			errs = append(errs, fmt.Errorf("argument %q: not a PV name", a))
		}
	}
	return errs
}

func (p *planOptions) config() migrate.Config {
	return migrate.Config{
		PVDir: p.pvDir, Pool: p.pool, AllowInUse: p.allowInUse,
		Select: migrate.Selection{Names: p.names, Namespace: p.namespace, Node: p.node},
	}
}

// runOptions shape a migrate or rollback run.
type runOptions struct {
	dryRun       bool
	parallel     int
	boundTimeout time.Duration
}

func (r *runOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&r.dryRun, "dry-run", false, "print the exact objects that would be written, write nothing")
	fs.IntVar(&r.parallel, "parallel", 16, "PVs replaced at the same time")
	fs.DurationVar(&r.boundTimeout, "bound-timeout", 2*time.Minute, "how long to wait for a claim to be Bound to its new PV")
}

func (r *runOptions) validate() []error {
	var errs []error
	if r.parallel < 1 || r.parallel > 64 {
		errs = append(errs, fmt.Errorf("--parallel %d: must be 1 to 64", r.parallel))
	}
	if r.boundTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--bound-timeout %s: must be positive", r.boundTimeout))
	}
	return errs
}

func usage(errs ...[]error) error {
	var all []error
	for _, e := range errs {
		all = append(all, e...)
	}
	return cli.Usage(all...)
}
