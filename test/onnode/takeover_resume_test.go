package onnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// checkSwitchChangesNothing runs the README's Switch section on the
// switched cluster: it must succeed within 10 s, reading and not writing.
func (r *takeoverRun) checkSwitchChangesNothing(ctx context.Context, t *testing.T) {
	t.Helper()
	from := time.Now()
	r.runSection(ctx, t, "Switch")
	took := time.Since(from)
	reads := r.checkNoWrites(t, from, "switch on the switched cluster")
	t.Logf("switch on the switched cluster: %.1f s, hpp-migrate made %d reads and no write", took.Seconds(), reads)
	if took > 10*time.Second {
		t.Errorf("switch on the switched cluster took %.1f s, want under 10", took.Seconds())
	}
	r.tl.mark(fmt.Sprintf("switch run again on the switched cluster: %.1f s, no write", took.Seconds()))
}

// checkPlanWritesNothing runs the Switch section's --plan line alone, on
// upstream's install, and holds it to its promise: it reads the cluster
// and changes nothing.
func (r *takeoverRun) checkPlanWritesNothing(ctx context.Context, t *testing.T) {
	t.Helper()
	var plan string
	for _, l := range strings.Split(readmeSection(t, repoRoot(t), "Switch"), "\n") {
		if strings.Contains(l, "--plan") {
			plan = l
		}
	}
	if plan == "" {
		t.Fatal("deploy/README.md Switch: no line with --plan")
	}
	from := time.Now()
	if err := r.runScript(ctx, t, "Switch (--plan alone)", plan, ""); err != nil {
		t.Fatalf("%s: %v", plan, err)
	}
	reads := r.checkNoWrites(t, from, "--plan")
	r.tl.mark(fmt.Sprintf("--plan on upstream's install: %d reads, no write", reads))
}

// checkNoWrites reads kube-apiserver's audit log since from: hpp-migrate
// must have read (so the check is not vacuous) and made no write (a dry
// run would not count: it stores nothing). It returns the reads.
func (r *takeoverRun) checkNoWrites(t *testing.T, from time.Time, what string) int {
	t.Helper()
	time.Sleep(time.Second) // the audit log is written as requests complete
	reads, writes, err := cluster.ReadsAndWrites(r.c.AuditLogPath(), from, isHPPMigrate)
	if err != nil {
		t.Fatal(err)
	}
	if reads == 0 {
		t.Fatalf("%s: no request of hpp-migrate in the audit log since %s: the check would pass on nothing", what, from.Format(time.RFC3339))
	}
	if len(writes) > 0 {
		t.Errorf("%s wrote:\n  %s", what, strings.Join(writes, "\n  "))
	}
	return reads
}

// isHPPMigrate: the user agent hpp-migrate sends (its client sets the
// command's name alone; a default client-go agent would add a version).
func isHPPMigrate(ua string) bool {
	return ua == "hpp-migrate" || strings.HasPrefix(ua, "hpp-migrate/")
}
