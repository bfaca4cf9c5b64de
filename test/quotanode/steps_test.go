package quotanode

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// stepCall is how the quota layer and the driver name a step a crash test
// can stop at: Options.Step("...") in internal/prjquota, rt.step("...") in
// the driver's pools runtime.
var stepCall = regexp.MustCompile(`(?:opts\.Step|rt\.step)\("([a-z.]+)"\)`)

// TestKillStepsCoverEveryStep keeps killSteps complete: every step the
// sources name is one the SIGKILL test stops at. It reads the sources, so
// it runs where they are (make unit, make quota-tests), not in the VM.
func TestKillStepsCoverEveryStep(t *testing.T) {
	_, self, _, ok := runtime.Caller(0)
	repo := filepath.Join(filepath.Dir(self), "..", "..")
	dirs := []string{filepath.Join(repo, "internal", "prjquota"), filepath.Join(repo, "cmd", "hpp-csi", "pools")}
	if _, err := os.Stat(dirs[0]); !ok || err != nil {
		t.Skipf("skipping: the sources are not here (%v; the quota VM carries only the binaries); checked where they are", err)
	}
	var named []string
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			// A moved package would otherwise leave its steps unchecked.
			t.Fatalf("no Go source in %s (%v): where are its steps named now?", dir, err)
		}
		before := len(named)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range stepCall.FindAllStringSubmatch(string(src), -1) {
				named = append(named, m[1])
			}
		}
		if len(named) == before {
			t.Errorf("no step named in %s: has the way steps are named changed? (%s)", dir, stepCall)
		}
	}
	if len(named) == 0 {
		t.Fatalf("no step found in %v: has the way steps are named changed? (%s)", dirs, stepCall)
	}
	for _, step := range named {
		if !slices.ContainsFunc(killSteps, func(k struct{ call, step string }) bool { return k.step == step }) {
			t.Errorf("step %q is named in the sources but the SIGKILL test never stops there: add it to killSteps", step)
		}
	}
	t.Logf("%d steps named in the sources, all in killSteps (%d kill points)", len(named), len(killSteps))
}
