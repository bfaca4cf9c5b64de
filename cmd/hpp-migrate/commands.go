package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func newRootCommand(env *environment) *cobra.Command {
	var g globalOptions
	root := cli.NewRoot("hpp-migrate", "moves legacy hostPath PVs onto the CSI driver in place")
	root.Long = "hpp-migrate replaces each legacy hostPath PV of kubevirt.io/hostpath-provisioner by a CSI PV of\n" +
		"the same name for kubevirt.io.hostpath-provisioner: same directory, same claim (its UID, owners and\n" +
		"labels survive), no data moved. Start with `plan`; `migrate` backs every PV up before changing it;\n" +
		"`rollback` puts the backups back."
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	g.addFlags(root)
	root.AddCommand(newPlanCommand(env, &g), newMigrateCommand(env, &g), newRollbackCommand(env, &g), newTakeoverCommand(env, &g))
	return root
}

func newPlanCommand(env *environment, g *globalOptions) *cobra.Command {
	var p planOptions
	var output string
	cmd := &cobra.Command{
		Use:   "plan [PV name...]",
		Short: "show the legacy PVs, what each becomes and why some cannot be migrated",
		RunE: func(cmd *cobra.Command, args []string) error {
			errs := append(g.validate(), p.validate(args)...)
			if output != "table" && output != "json" && output != "yaml" {
				errs = append(errs, fmt.Errorf("-o %q: must be table, json or yaml", output))
			}
			if err := usage(errs); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			plan, err := makePlan(cmd.Context(), c, &p)
			if err != nil {
				return err
			}
			if output == "table" {
				printPlan(env.stdout, plan)
				return nil
			}
			return printObject(env.stdout, output, plan)
		},
	}
	p.addFlags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return cmd
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

func newMigrateCommand(env *environment, g *globalOptions) *cobra.Command {
	var p planOptions
	var r runOptions
	var classes bool
	cmd := &cobra.Command{
		Use:   "migrate [PV name...]",
		Short: "replace legacy PVs (all, or those named/selected) by CSI PVs, backing each up first",
		RunE: func(cmd *cobra.Command, args []string) error {
			hook, err := env.failureHook()
			if err := usage(g.validate(), p.validate(args), r.validate(), errList(err)); err != nil {
				return err
			}
			started := time.Now()
			c, urgent, err := g.clients()
			if err != nil {
				return err
			}
			plan, err := makePlan(cmd.Context(), c, &p)
			if err != nil {
				return err
			}
			if r.dryRun {
				return printDryRun(env.stdout, plan, p.backupDir, classes)
			}
			printInUse(env.stdout, plan)
			var results []migrate.Result
			if classes {
				results = migrate.CreateClasses(cmd.Context(), c, plan)
			}
			runner := &migrate.Runner{
				Engine:   &migrate.Engine{Client: c, Urgent: urgent, AfterStep: hook, BoundTimeout: r.boundTimeout},
				Backups:  migrate.Backups{Dir: p.backupDir},
				Parallel: r.parallel,
				Progress: env.progress("migrating"),
			}
			results = append(results, runner.Migrate(cmd.Context(), plan)...)
			printSummary(env.stdout, results, g.requests.Load(), time.Since(started))
			env.failed = migrate.Failed(results) || namedSkipped(p.names, results)
			return nil
		},
	}
	p.addFlags(cmd)
	r.addFlags(cmd)
	cmd.Flags().BoolVar(&classes, "storage-classes", false, "also create a CSI StorageClass <name>-csi for each legacy StorageClass (never edits one)")
	return cmd
}

func newRollbackCommand(env *environment, g *globalOptions) *cobra.Command {
	var r runOptions
	var backupDir string
	cmd := &cobra.Command{
		Use:   "rollback [PV name...]",
		Short: "put backed-up legacy PVs back in place of their CSI PVs (all backups, or those named)",
		RunE: func(cmd *cobra.Command, args []string) error {
			hook, err := env.failureHook()
			errs := append(g.validate(), r.validate()...)
			if backupDir == "" {
				errs = append(errs, fmt.Errorf("--backup-dir: empty"))
			}
			if err := usage(errs, errList(err)); err != nil {
				return err
			}
			backups := migrate.Backups{Dir: backupDir}
			names, err := backups.Names()
			if err != nil {
				return err
			}
			if len(args) > 0 {
				for _, a := range args {
					if !slices.Contains(names, a) {
						return cli.Usage(fmt.Errorf("argument %q: no backup %s/%s.yaml", a, backupDir, a))
					}
				}
				names = args
			}
			if len(names) == 0 {
				return cli.Usage(fmt.Errorf("--backup-dir %s: no backups to roll back", backupDir))
			}
			if r.dryRun {
				return printRollbackDryRun(env.stdout, backups, names)
			}
			started := time.Now()
			c, urgent, err := g.clients()
			if err != nil {
				return err
			}
			runner := &migrate.Runner{
				Engine:   &migrate.Engine{Client: c, Urgent: urgent, AfterStep: hook, BoundTimeout: r.boundTimeout},
				Backups:  backups,
				Parallel: r.parallel,
				Progress: env.progress("rolling back"),
			}
			results := runner.Rollback(cmd.Context(), names)
			printSummary(env.stdout, results, g.requests.Load(), time.Since(started))
			env.failed = migrate.Failed(results)
			return nil
		},
	}
	r.addFlags(cmd)
	cmd.Flags().StringVar(&backupDir, "backup-dir", "hpp-migrate-backup", "directory of the PV backups written by migrate")
	return cmd
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
