package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-migrate/migrate"
)

func TestProgress(t *testing.T) {
	results := []migrate.Result{
		{PV: "a", Outcome: migrate.OutcomeMigrated},
		{PV: "b", Outcome: migrate.OutcomeFailed, Reason: "PV b: boom"},
		{PV: "c", Outcome: migrate.OutcomeSkipped, Reason: "in use"},
	}
	for _, terminal := range []bool{false, true} {
		var out bytes.Buffer
		env := &environment{stderr: &out, terminal: terminal}
		p := env.progress("migrating")
		p.Start(len(results))
		for _, r := range results {
			p.Done(r)
		}
		p.Finish()
		got := out.String()
		var want []string
		if terminal {
			// The bar is redrawn in place; failures are printed above it.
			want = []string{"migrating", "failed: PV b: PV b: boom"}
		} else {
			want = []string{"migrating 3 PVs\n", "[1/3] Migrated a\n", "[2/3] Failed b: PV b: boom\n", "[3/3] Skipped c: in use\n"}
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("terminal=%v: output lacks %q:\n%q", terminal, w, got)
			}
		}
	}
}
