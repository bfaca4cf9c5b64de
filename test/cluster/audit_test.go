package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// auditLine is one audit.k8s.io/v1 event as kube-apiserver writes it.
func auditLine(at, verb, agent string, code int, resource, ns, name string) string {
	return `{"stage":"ResponseComplete","stageTimestamp":"` + at + `","verb":"` + verb + `","userAgent":"` + agent +
		`","objectRef":{"resource":"` + resource + `","namespace":"` + ns + `","name":"` + name +
		`"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
}

// TestDeletesReadsTheWindow: Deletes keeps only the successful deletes of
// the named user agent inside the window, and Unexpected reports a delete
// that was not asked for: the node-loss tier's "nothing else deleted"
// fails when fed one.
func TestDeletesReadsTheWindow(t *testing.T) {
	const op = "hpp-operator/v0.1.0 (linux/amd64) kubernetes/abc"
	lines := []string{
		auditLine("2026-11-28T10:00:00.000000Z", "delete", op, 200, "persistentvolumes", "", "before-window"),
		auditLine("2026-11-28T10:00:10.000000Z", "delete", op, 200, "persistentvolumeclaims", "ns", "data-web-0"),
		auditLine("2026-11-28T10:00:11.000000Z", "delete", op, 404, "pods", "ns", "web-0"),
		auditLine("2026-11-28T10:00:12.000000Z", "delete", "kube-controller-manager/v1.37.1", 200, "pods", "ns", "web-0"),
		auditLine("2026-11-28T10:00:13.000000Z", "create", op, 201, "persistentvolumeclaims", "ns", "made"),
		auditLine("2026-11-28T10:00:14.000000Z", "delete", op, 200, "persistentvolumes", "", "pv-1"),
		auditLine("2026-11-28T10:00:15.000000Z", "delete", op, 200, "persistentvolumeclaims", "ns", "kept"),
		auditLine("2026-11-28T10:01:00.000000Z", "delete", op, 200, "persistentvolumes", "", "after-window"),
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 28, 10, 0, 5, 0, time.UTC)
	got, err := Deletes(path, "hpp-operator/", from, from.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"persistentvolumeclaims ns/data-web-0", "persistentvolumes pv-1", "persistentvolumeclaims ns/kept"}
	if !slices.Equal(got, want) {
		t.Fatalf("Deletes = %v; want %v", got, want)
	}
	extra := Unexpected(got, "persistentvolumeclaims ns/data-web-0", "pods ns/web-0", "persistentvolumes pv-1")
	if !slices.Equal(extra, []string{"persistentvolumeclaims ns/kept"}) {
		t.Errorf("Unexpected = %v; want the delete of claim ns/kept", extra)
	}
	if extra := Unexpected(want[:2], want[0], want[1]); extra != nil {
		t.Errorf("Unexpected with every delete asked for = %v; want none", extra)
	}
}

// TestReadsAndWritesFindsAWrite: a plan that wrote once (a patch), among
// reads, another agent's write and a dry run, is caught: the takeover
// tier's "--plan writes nothing" fails when fed a write.
func TestReadsAndWritesFindsAWrite(t *testing.T) {
	line := func(at, verb, agent, uri string) string {
		return `{"stage":"ResponseComplete","stageTimestamp":"` + at + `","verb":"` + verb + `","userAgent":"` + agent +
			`","requestURI":"` + uri + `","responseStatus":{"code":200}}`
	}
	lines := []string{
		line("2026-11-28T10:00:00.000000Z", "patch", "hpp-migrate", "/apis/apps/v1/earlier"),
		line("2026-11-28T10:00:10.000000Z", "get", "hpp-migrate", "/api/v1/namespaces/a"),
		line("2026-11-28T10:00:11.000000Z", "list", "hpp-migrate", "/api/v1/persistentvolumes"),
		line("2026-11-28T10:00:12.000000Z", "patch", "hpp-migrate", "/apis/apps/v1/x?dryRun=All"),
		line("2026-11-28T10:00:13.000000Z", "update", "kubelet/v1.37.1", "/api/v1/nodes/n"),
		line("2026-11-28T10:00:14.000000Z", "patch", "hpp-migrate", "/apis/apps/v1/namespaces/a/daemonsets/d"),
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	isMigrate := func(ua string) bool { return ua == "hpp-migrate" }
	reads, writes, err := ReadsAndWrites(path, time.Date(2026, 11, 28, 10, 0, 5, 0, time.UTC), isMigrate)
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 || !slices.Equal(writes, []string{"patch /apis/apps/v1/namespaces/a/daemonsets/d (200)"}) {
		t.Errorf("reads %d, writes %v; want 2 reads and the one patch of the daemonset", reads, writes)
	}
}
