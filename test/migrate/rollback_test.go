package migrate

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRollbackOfInterruptedMigration: a migration killed after any step is
// rolled back (instead of resumed) to the original legacy PV, with the
// claim Bound throughout.
func TestRollbackOfInterruptedMigration(t *testing.T) {
	cp := startControlPlane(t, binaries(t), time.Hour)
	c := cp.client
	const ns = "vms"
	setupCluster(t, c, ns)
	backupDir := filepath.Join(t.TempDir(), "backup")
	uids := map[string]string{}
	for i := range steps {
		pv := fmt.Sprintf("pvc-5555555%d-1111-2222-3333-444444444444", i)
		uids[pv] = string(legacyVolume(t, c, ns, fmt.Sprintf("disk-%d", i), pv, i%2 == 0).UID)
	}
	waitBound(t, c, ns, len(steps))
	phases := recordPhases(t, c, ns)
	for i, step := range steps {
		pv, claim := fmt.Sprintf("pvc-5555555%d-1111-2222-3333-444444444444", i), fmt.Sprintf("disk-%d", i)
		if res := hppMigrate(t, cp, step, "migrate", "--backup-dir", backupDir, pv); res.code != 3 {
			t.Fatalf("migrate killed after %s: %s", step, res)
		}
		res := hppMigrate(t, cp, "", "rollback", "--backup-dir", backupDir, pv)
		done := strings.Contains(res.stdout, "1 rolled back") || strings.Contains(res.stdout, "1 already done")
		if res.code != 0 || !done {
			t.Fatalf("rollback after a migration killed after %s: %s", step, res)
		}
		checkLegacy(t, c, ns, pv, claim, uids[pv])
	}
	checkPVNames(t, c, "pvc-55555550-...", len(steps))
	if seen := phases.notBound(); len(seen) > 0 {
		t.Errorf("claims left Bound:\n%s", strings.Join(seen, "\n"))
	}
}
