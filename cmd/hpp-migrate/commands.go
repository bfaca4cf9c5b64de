package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
	"github.com/hostpath-provisioner/hpp/internal/cli"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func newRootCommand(env *environment) *cobra.Command {
	var g globalOptions
	root := cli.NewRoot("hpp-migrate", "moves legacy hostPath PVs onto the CSI driver in place")
	root.Long = "hpp-migrate replaces each legacy hostPath PV of " + contract.LegacyProvisionerName + " by a CSI PV of\n" +
		"the same name for " + contract.DriverName + ": same directory, same claim (its UID, owners and\n" +
		"labels survive), no data moved. Start with `plan`; `migrate` backs every PV up before changing it;\n" +
		"`rollback` puts the backups back."
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	g.addFlags(root)
	root.AddCommand(newPlanCommand(env, &g), newMigrateCommand(env, &g), newRollbackCommand(env, &g), newTakeoverCommand(env, &g))
	return root
}

// runE is cli.RunE for a subcommand: the positional arguments (PV names)
// go to *names, when it takes them, before Validate.
func runE(names *[]string, validate func() error, run func(context.Context) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if names != nil {
			*names = args
		}
		return cli.RunE(validate, run)(cmd, args)
	}
}

// planCommand is `hpp-migrate plan`.
type planCommand struct {
	env    *environment
	g      *globalOptions
	p      planOptions
	output string
}

func newPlanCommand(env *environment, g *globalOptions) *cobra.Command {
	c := &planCommand{env: env, g: g}
	cmd := &cobra.Command{
		Use:   "plan [PV name...]",
		Short: "show the legacy PVs, what each becomes and why some cannot be migrated",
		RunE:  runE(&c.p.names, c.Validate, c.Run),
	}
	c.p.addFlags(cmd)
	cmd.Flags().StringVarP(&c.output, "output", "o", "table", "table, json or yaml")
	return cmd
}

// Validate names every bad flag and argument at once.
func (c *planCommand) Validate() error {
	errs := append(c.g.validate(), c.p.validate()...)
	if c.output != "table" && c.output != "json" && c.output != "yaml" {
		errs = append(errs, fmt.Errorf("-o %q: must be table, json or yaml", c.output))
	}
	return cli.Usage(errs...)
}

func (c *planCommand) Run(ctx context.Context) error {
	client, err := c.g.client()
	if err != nil {
		return err
	}
	plan, err := makePlan(ctx, client, &c.p)
	if err != nil {
		return err
	}
	if c.output == "table" {
		printPlan(c.env.stdout, plan)
		return nil
	}
	return printObject(c.env.stdout, c.output, plan)
}

func makePlan(ctx context.Context, c kubernetes.Interface, p *planOptions) (*migrate.Plan, error) {
	inv, err := migrate.Collect(ctx, c, migrate.Backups{Dir: p.backupDir})
	if err != nil {
		return nil, err
	}
	plan, err := migrate.Assess(inv, p.config())
	if err != nil {
		return nil, cli.Usage(err)
	}
	for _, n := range p.names {
		if !slices.ContainsFunc(plan.Items, func(it migrate.Item) bool { return it.PV == n }) {
			return nil, cli.Usage(fmt.Errorf("argument %q: no legacy PV of that name (nor a backup of one)", n))
		}
	}
	return plan, nil
}

// migrateCommand is `hpp-migrate migrate`.
type migrateCommand struct {
	env     *environment
	g       *globalOptions
	p       planOptions
	r       runOptions
	classes bool

	hook func(string, migrate.Step) // filled by Validate (HPP_MIGRATE_FAIL_AFTER)
}

func newMigrateCommand(env *environment, g *globalOptions) *cobra.Command {
	c := &migrateCommand{env: env, g: g}
	cmd := &cobra.Command{
		Use:   "migrate [PV name...]",
		Short: "replace legacy PVs (all, or those named/selected) by CSI PVs, backing each up first",
		RunE:  runE(&c.p.names, c.Validate, c.Run),
	}
	c.p.addFlags(cmd)
	c.r.addFlags(cmd)
	cmd.Flags().BoolVar(&c.classes, "storage-classes", false, "also create a CSI StorageClass <name>-csi for each legacy StorageClass (never edits one)")
	return cmd
}

// Validate names every bad flag, argument and test setting at once.
func (c *migrateCommand) Validate() error {
	var err error
	c.hook, err = c.env.failureHook()
	return usage(c.g.validate(), c.p.validate(), c.r.validate(), errList(err))
}

func (c *migrateCommand) Run(ctx context.Context) error {
	started := time.Now()
	client, urgent, err := c.g.clients()
	if err != nil {
		return err
	}
	plan, err := makePlan(ctx, client, &c.p)
	if err != nil {
		return err
	}
	if c.r.dryRun {
		return printDryRun(c.env.stdout, plan, c.p.backupDir, c.classes)
	}
	printInUse(c.env.stdout, plan)
	var results []migrate.Result
	if c.classes {
		results = migrate.CreateClasses(ctx, client, plan)
	}
	runner := &migrate.Runner{
		Engine:   &migrate.Engine{Client: client, Urgent: urgent, AfterStep: c.hook, BoundTimeout: c.r.boundTimeout},
		Backups:  migrate.Backups{Dir: c.p.backupDir},
		Parallel: c.r.parallel,
		Progress: c.env.progress("migrating"),
	}
	results = append(results, runner.Migrate(ctx, plan)...)
	printSummary(c.env.stdout, results, c.g.requests.Load(), time.Since(started))
	c.env.failed = migrate.Failed(results) || namedSkipped(c.p.names, results)
	return nil
}

// rollbackCommand is `hpp-migrate rollback`.
type rollbackCommand struct {
	env       *environment
	g         *globalOptions
	r         runOptions
	backupDir string
	names     []string

	hook func(string, migrate.Step) // filled by Validate (HPP_MIGRATE_FAIL_AFTER)
}

func newRollbackCommand(env *environment, g *globalOptions) *cobra.Command {
	c := &rollbackCommand{env: env, g: g}
	cmd := &cobra.Command{
		Use:   "rollback [PV name...]",
		Short: "put backed-up legacy PVs back in place of their CSI PVs (all backups, or those named)",
		RunE:  runE(&c.names, c.Validate, c.Run),
	}
	c.r.addFlags(cmd)
	cmd.Flags().StringVar(&c.backupDir, "backup-dir", "hpp-migrate-backup", "directory of the PV backups written by migrate")
	return cmd
}

// Validate names every bad flag and test setting at once; which backups
// exist is Run's to find out.
func (c *rollbackCommand) Validate() error {
	var err error
	c.hook, err = c.env.failureHook()
	errs := append(c.g.validate(), c.r.validate()...)
	if c.backupDir == "" {
		errs = append(errs, errors.New("--backup-dir: empty"))
	}
	return usage(errs, errList(err))
}

func (c *rollbackCommand) Run(ctx context.Context) error {
	backups := migrate.Backups{Dir: c.backupDir}
	names, err := backups.Names()
	if err != nil {
		return err
	}
	if len(c.names) > 0 {
		for _, a := range c.names {
			if !slices.Contains(names, a) {
				return cli.Usage(fmt.Errorf("argument %q: no backup %s/%s.yaml", a, c.backupDir, a))
			}
		}
		names = c.names
	}
	if len(names) == 0 {
		return cli.Usage(fmt.Errorf("--backup-dir %s: no backups to roll back", c.backupDir))
	}
	if c.r.dryRun {
		return printRollbackDryRun(c.env.stdout, backups, names)
	}
	started := time.Now()
	client, urgent, err := c.g.clients()
	if err != nil {
		return err
	}
	runner := &migrate.Runner{
		Engine:   &migrate.Engine{Client: client, Urgent: urgent, AfterStep: c.hook, BoundTimeout: c.r.boundTimeout},
		Backups:  backups,
		Parallel: c.r.parallel,
		Progress: c.env.progress("rolling back"),
	}
	results := runner.Rollback(ctx, names)
	printSummary(c.env.stdout, results, c.g.requests.Load(), time.Since(started))
	c.env.failed = migrate.Failed(results)
	return nil
}

// failureHook parses HPP_MIGRATE_FAIL_AFTER into the engine's AfterStep.
func (env *environment) failureHook() (func(string, migrate.Step), error) {
	if env.failAfter == "" {
		return nil, nil
	}
	step, pv, _ := strings.Cut(env.failAfter, ":")
	if !slices.Contains(migrate.Steps, migrate.Step(step)) {
		return nil, fmt.Errorf("%s=%q: step must be one of %v", envFailAfter, env.failAfter, migrate.Steps)
	}
	return func(name string, s migrate.Step) {
		if string(s) == step && (pv == "" || pv == name) {
			fmt.Fprintf(env.stderr, "hpp-migrate: %s: exiting after step %s of PV %s\n", envFailAfter, s, name)
			env.exit(3)
		}
	}, nil
}

// namedSkipped: PVs the user named explicitly and that were skipped count
// as a failure of the run (the user asked for them).
func namedSkipped(names []string, results []migrate.Result) bool {
	for _, r := range results {
		if r.Outcome == migrate.OutcomeSkipped && slices.Contains(names, r.PV) {
			return true
		}
	}
	return false
}

func errList(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
