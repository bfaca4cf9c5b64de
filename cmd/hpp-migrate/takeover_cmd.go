package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/takeover"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

// takeoverOptions are the flags of `hpp-migrate takeover`.
type takeoverOptions struct {
	plan, back, force bool
	file              string
	namespace         string
	output            string
	timeout           time.Duration
}

func (o *takeoverOptions) validate() []error {
	var errs []error
	if o.plan && o.back {
		errs = append(errs, errors.New("--plan and --back: choose one"))
	}
	if !o.back && o.file == "" {
		errs = append(errs, errors.New("-f: required (hpp's operator install: `kubectl kustomize deploy/overlays/operator | hpp-migrate takeover -f -`)"))
	}
	if o.back && o.file != "" {
		errs = append(errs, errors.New("-f: not with --back (the way back restores upstream's objects from the backup the switch made)"))
	}
	if o.namespace == "" {
		errs = append(errs, errors.New("--namespace: empty"))
	}
	if o.output != "table" && o.output != "json" && o.output != "yaml" {
		errs = append(errs, fmt.Errorf("-o %q: must be table, json or yaml", o.output))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: must be positive", o.timeout))
	}
	return errs
}

// takeoverCommand is `hpp-migrate takeover`.
type takeoverCommand struct {
	env *environment
	g   *globalOptions
	o   takeoverOptions
}

func newTakeoverCommand(env *environment, g *globalOptions) *cobra.Command {
	c := &takeoverCommand{env: env, g: g}
	o := &c.o
	cmd := &cobra.Command{
		Use:   "takeover -f <hpp's operator manifests> [--plan] | takeover --back",
		Short: "switch a namespace from the KubeVirt hostpath-provisioner-operator to hpp's (--plan: say what would happen; --back: return)",
		Long: "takeover switches an install of the KubeVirt hostpath-provisioner-operator to hpp-operator in place:\n" +
			"upstream's operator and webhook stop, hpp's install is applied server-side over upstream's objects\n" +
			"(the fields `kubectl create` wrote handed over first, conflicts forced), and hpp's operator adopts the\n" +
			"CR, the CSI DaemonSet (rolled, same uid), the pool claims and mounters (same names, pools stay mounted).\n" +
			"--plan reads the cluster and changes nothing; exit status 1 means no-go. Every step checks the cluster\n" +
			"first, so a second run finishes an interrupted one. --back restores upstream's operator from the backup\n" +
			"Secret " + takeover.BackupSecret + " the switch made.",
		RunE: runE(nil, c.Validate, c.Run),
	}
	fs := cmd.Flags()
	fs.BoolVar(&o.plan, "plan", false, "read the cluster and print what the switch would do, and go or no-go; change nothing")
	fs.BoolVar(&o.back, "back", false, "return the namespace to upstream's operator (from the backup the switch made)")
	fs.BoolVar(&o.force, "force", false, "switch despite a no-go")
	fs.StringVarP(&o.file, "filename", "f", "", "hpp's operator install as YAML (- for stdin): `kubectl kustomize deploy/overlays/operator`")
	fs.StringVarP(&o.namespace, "namespace", "n", "hostpath-provisioner", "the namespace upstream's operator runs in (hpp's manifests must use the same)")
	fs.StringVarP(&o.output, "output", "o", "table", "--plan output: table, json or yaml")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long each wait (operator Available, node pods rolled) may take")
	return cmd
}

// Validate names every bad flag at once.
func (c *takeoverCommand) Validate() error { return usage(c.g.validate(), c.o.validate()) }

func (c *takeoverCommand) Run(ctx context.Context) error {
	o, env, g := &c.o, c.env, c.g
	cfg, err := g.config()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	runner := &takeover.Runner{Client: dyn, Namespace: o.namespace, Out: env.stdout, Timeout: o.timeout}
	if !o.plan {
		// A run that resumes an interrupted one may find the node pods'
		// roll under way: their stopping driver pods go at once
		// (takeover/hurry.go) before the cluster is read for the plan,
		// which takes seconds in which those nodes would have no driver.
		if err := runner.HurryOldDriverPods(ctx); err != nil {
			return err
		}
	}
	if o.back {
		return runner.Back(ctx)
	}
	manifests, err := readManifestFile(o.file)
	if err != nil {
		return cli.Usage(fmt.Errorf("-f %s: %w", o.file, err))
	}
	if err := inNamespace(manifests, o.namespace); err != nil {
		return cli.Usage(err)
	}
	inv, err := takeover.Collect(ctx, dyn, o.namespace, manifests)
	if err != nil {
		return err
	}
	plan := takeover.Assess(inv)
	if o.plan {
		if o.output == "table" {
			plan.Print(env.stdout)
		} else if err := printObject(env.stdout, o.output, plan); err != nil {
			return err
		}
		env.failed = !plan.Go()
		return nil
	}
	plan.Print(env.stdout)
	fmt.Fprintln(env.stdout)
	if !plan.Go() && !o.force {
		env.failed = true
		return nil
	}
	if o.force && !plan.Go() {
		plan.NoGo = nil
	}
	return runner.Switch(ctx, inv, plan)
}

func readManifestFile(name string) ([]*unstructured.Unstructured, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }() // read only
		r = f
	}
	return takeover.ReadManifests(r)
}

// inNamespace: every namespaced manifest object is in ns (the overlay's
// namespace: line must name upstream's namespace).
func inNamespace(objs []*unstructured.Unstructured, ns string) error {
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != ns {
			return fmt.Errorf("-f: %s %s is in namespace %q, not %q: set the overlay's namespace: to the one upstream's operator runs in", o.GetKind(), o.GetName(), o.GetNamespace(), ns)
		}
	}
	return nil
}
