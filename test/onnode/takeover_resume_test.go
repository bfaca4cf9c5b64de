package onnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// checkSwitchChangesNothing runs the README's Switch section on the
// switched cluster: it must succeed within 10 s, and kube-apiserver's
// audit log must show hpp-migrate reading (so the check is not vacuous)
// and not one write of it (a dry run would not count: it stores nothing).
func (r *takeoverRun) checkSwitchChangesNothing(ctx context.Context, t *testing.T) {
	t.Helper()
	from := time.Now()
	r.runSection(ctx, t, "Switch")
	took := time.Since(from)
	time.Sleep(time.Second) // the audit log is written as requests complete
	reads, writes := 0, []string{}
	err := cluster.ReadAuditLog(r.c.AuditLogPath(), func(ev *cluster.AuditEvent) {
		if ev.Stage != "ResponseComplete" || ev.StageTimestamp.Time.Before(from) || !isHPPMigrate(ev.UserAgent) {
			return
		}
		if !slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, ev.Verb) {
			reads++
			return
		}
		if !strings.Contains(ev.RequestURI, "dryRun=") {
			writes = append(writes, fmt.Sprintf("%s %s (%d)", ev.Verb, ev.RequestURI, ev.ResponseStatus.Code))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switch on the switched cluster: %.1f s, hpp-migrate made %d reads and %d writes", took.Seconds(), reads, len(writes))
	if reads == 0 {
		t.Fatalf("no request of hpp-migrate in the audit log since %s: the check would pass on nothing", from.Format(time.RFC3339))
	}
	if len(writes) > 0 {
		t.Errorf("switch on the switched cluster wrote:\n  %s", strings.Join(writes, "\n  "))
	}
	if took > 10*time.Second {
		t.Errorf("switch on the switched cluster took %.1f s, want under 10", took.Seconds())
	}
	r.tl.mark(fmt.Sprintf("switch run again on the switched cluster: %.1f s, no write", took.Seconds()))
}

// isHPPMigrate: the user agent hpp-migrate sends (its client sets the
// command's name alone; a default client-go agent would add a version).
func isHPPMigrate(ua string) bool {
	return ua == "hpp-migrate" || strings.HasPrefix(ua, "hpp-migrate/")
}
