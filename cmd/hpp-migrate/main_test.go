package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/cli"
)

func runCLI(t *testing.T, failAfter string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := &environment{failAfter: failAfter, stdout: &stdout, stderr: &stderr, exit: func(int) { t.Fatal("exit called") }}
	code := cli.Main(newRootCommand(env), args, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestBadFlagsNameEveryField(t *testing.T) {
	code, _, stderr := runCLI(t, "", "migrate", "--pv-dir", "var/hp", "--storage-pool", "", "--backup-dir", "",
		"--parallel", "0", "--bound-timeout", "0s", "--kube-api-qps", "0", "a/b")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		`--kube-api-qps 0: must be positive`,
		`--pv-dir "var/hp": must be an absolute path`,
		`--storage-pool: empty (the hpp-csi pool that serves the legacy directories)`,
		`--backup-dir: empty (the originals must be saved before anything changes)`,
		`argument "a/b": not a PV name`,
		`--parallel 0: must be 1 to 64`,
		`--bound-timeout 0s: must be positive`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestPlanOutputFormat(t *testing.T) {
	code, _, stderr := runCLI(t, "", "plan", "-o", "xml")
	if code != 2 || !strings.Contains(stderr, `-o "xml": must be table, json or yaml`) {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestFailureInjectionSetting(t *testing.T) {
	code, _, stderr := runCLI(t, "later", "migrate")
	want := `HPP_MIGRATE_FAIL_AFTER="later": step must be one of [backup hold delete park release create restore confirm]`
	if code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, want 2 with %q; stderr:\n%s", code, want, stderr)
	}
	var exited int
	env := &environment{failAfter: "park:pv-2", stderr: &bytes.Buffer{}, exit: func(c int) { exited = c }}
	hook, err := env.failureHook()
	if err != nil {
		t.Fatal(err)
	}
	hook("pv-1", "park")
	hook("pv-2", "release")
	if exited != 0 {
		t.Fatalf("exited %d before the named step of the named PV", exited)
	}
	hook("pv-2", "park")
	if exited != 3 {
		t.Errorf("exit %d after park of pv-2, want 3", exited)
	}
}

func TestRollbackWithoutBackups(t *testing.T) {
	code, _, stderr := runCLI(t, "", "rollback", "--backup-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "no backups to roll back") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// Every subcommand's Validate names each bad flag and argument at once and
// exits 2 before it reaches the cluster.
func TestEverySubcommandNamesEveryBadField(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"plan", "--pv-dir", "rel", "--storage-pool", "", "--backup-dir", "", "-o", "xml", "--kube-api-burst", "0", "x/y"}, []string{
			`--pv-dir "rel": must be an absolute path`,
			"--storage-pool: empty",
			"--backup-dir: empty",
			`-o "xml": must be table, json or yaml`,
			"--kube-api-burst 0: must be at least 1",
			`argument "x/y": not a PV name`,
		}},
		{[]string{"rollback", "--backup-dir", "", "--parallel", "65", "--bound-timeout", "-1s", "--kube-api-qps", "-1"}, []string{
			"--backup-dir: empty",
			"--parallel 65: must be 1 to 64",
			"--bound-timeout -1s: must be positive",
			"--kube-api-qps -1: must be positive",
		}},
		{[]string{"takeover", "--plan", "--back", "-f", "x.yaml", "-n", "", "-o", "xml", "--timeout", "0s"}, []string{
			"--plan and --back: choose one",
			"-f: not with --back",
			"--namespace: empty",
			`-o "xml": must be table, json or yaml`,
			"--timeout 0s: must be positive",
		}},
		{[]string{"takeover"}, []string{"-f: required"}},
	} {
		code, _, stderr := runCLI(t, "", c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr:\n%s", c.args, code, stderr)
		}
		for _, want := range c.want {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, want, stderr)
			}
		}
	}
}
