package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

func printObject(w io.Writer, format string, obj any) error {
	var data []byte
	var err error
	if format == "json" {
		data, err = json.MarshalIndent(obj, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(obj)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printPlan(w io.Writer, plan *migrate.Plan) {
	fmt.Fprintf(w, "PV_DIR %s -> hpp-csi pool %q (its legacyPath)\n\n", dash(plan.PVDir), plan.Pool)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PV\tCLAIM\tNODE\tDIRECTORY\tSIZE\tIN USE BY\tBECOMES\tSTATE\tREASON")
	for _, it := range plan.Items {
		becomes := "-"
		if it.Want != nil {
			becomes = fmt.Sprintf("csi %s handle=%s pool=%s", contract.DriverName, it.VolumeHandle, plan.Pool)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.PV, dash(it.Claim), dash(it.Node), dash(it.Directory),
			dash(it.Size), dash(strings.Join(it.Pods, ",")), becomes, it.State, dash(strings.Join(it.Reasons, "; ")))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d legacy PVs: %d ready, %d interrupted (migrate finishes them), %d blocked, %d already migrated\n",
		len(plan.Items), plan.Count(migrate.StateReady), plan.Count(migrate.StateInterrupted), plan.Count(migrate.StateBlocked), plan.Count(migrate.StateMigrated))
	if len(plan.StorageClasses) == 0 {
		return
	}
	fmt.Fprintln(w, "\nlegacy StorageClasses (migrate --storage-classes creates the missing CSI ones):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEGACY CLASS\tCSI CLASS\tSTATE\tREASON")
	for _, c := range plan.StorageClasses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Legacy, c.CSI, c.State, dash(c.Reason))
	}
	_ = tw.Flush()
}

// printInUse says what happens to running pods of PVs migrated with
// --allow-in-use.
func printInUse(w io.Writer, plan *migrate.Plan) {
	for _, it := range plan.Items {
		if len(it.Pods) == 0 || it.Want == nil {
			continue
		}
		fmt.Fprintf(w, "PV %s is in use by %s: they keep the directory through the hostPath mount they started with; "+
			"when they are re-created they mount it through hpp-csi on node %s. Nothing is moved or unmounted.\n",
			it.PV, strings.Join(it.Pods, ", "), it.Node)
	}
}

func printSummary(w io.Writer, results []migrate.Result, requests int64, took time.Duration) {
	counts := map[migrate.Outcome]int{}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nOBJECT\tCLAIM\tRESULT\tREASON")
	for _, r := range results {
		counts[r.Outcome]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.PV, dash(r.Claim), r.Outcome, dash(r.Reason))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d migrated, %d rolled back, %d already done, %d skipped, %d failed\n",
		counts[migrate.OutcomeMigrated], counts[migrate.OutcomeRestored], counts[migrate.OutcomeDone], counts[migrate.OutcomeSkipped], counts[migrate.OutcomeFailed])
	fmt.Fprintf(w, "took %s, %d API requests\n", took.Round(time.Millisecond), requests)
}

// printDryRun prints, per PV, every write migrate would make, with the
// full object it would create.
func printDryRun(w io.Writer, plan *migrate.Plan, backupDir string, classes bool) error {
	if classes {
		for _, c := range plan.StorageClasses {
			if c.State != "Create" {
				fmt.Fprintf(w, "# StorageClass %s: %s, not written\n", c.CSI, c.State)
				continue
			}
			fmt.Fprintf(w, "# create StorageClass %s (for %s)\n", c.CSI, c.Legacy)
			if err := printDoc(w, c.Object); err != nil {
				return err
			}
		}
	}
	for _, it := range plan.Items {
		if it.Want == nil {
			fmt.Fprintf(w, "# PV %s: %s, not written: %s\n", it.PV, it.State, dash(strings.Join(it.Reasons, "; ")))
			continue
		}
		created := it.Want.DeepCopy()
		created.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		fmt.Fprintf(w, "# PV %s (%s): 1. back up to %s/%s.yaml  2. patch persistentVolumeReclaimPolicy=Retain, add finalizer %s  "+
			"3. delete  4. update claimRef.name=%s, finalizers=[] (the PV goes)  5. create:\n",
			it.PV, it.State, backupDir, it.PV, contract.FinalizerMigration, migrate.ParkedClaimName(it.Original.Spec.ClaimRef.UID))
		if err := printDoc(w, created); err != nil {
			return err
		}
		fmt.Fprintf(w, "# PV %s: 6. patch persistentVolumeReclaimPolicy=%s  7. wait until PV and claim %s are Bound\n",
			it.PV, it.Want.Spec.PersistentVolumeReclaimPolicy, it.Claim)
	}
	return nil
}

func printRollbackDryRun(w io.Writer, backups migrate.Backups, names []string) error {
	for _, n := range names {
		b, err := backups.Load(n)
		if err != nil {
			return err
		}
		want := migrate.Restore(b)
		created := want.DeepCopy()
		created.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		fmt.Fprintf(w, "# PV %s: replace the CSI PV (Retain, finalizer, delete, park claimRef) by:\n", n)
		if err := printDoc(w, created); err != nil {
			return err
		}
		fmt.Fprintf(w, "# PV %s: then patch persistentVolumeReclaimPolicy=%s and wait until Bound\n", n, want.Spec.PersistentVolumeReclaimPolicy)
	}
	return nil
}

func printDoc(w io.Writer, obj any) error {
	data, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", data)
	return err
}
