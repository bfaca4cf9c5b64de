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
