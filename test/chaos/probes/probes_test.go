package probes

import (
	"errors"
	"os"
	"strings"
	"testing"
)

const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 7:0 / /var/hpp/fast rw,relatime shared:40 - xfs /dev/loop0 rw,prjquota
91 22 0:50 / /var/hpp/with\040space rw shared:41 - tmpfs tmpfs rw
`

func TestMounts(t *testing.T) {
	paths := []string{"/var/hpp/fast", "/var/hpp/with space", "/var/hpp/none"}
	before, err := MountIDs(strings.NewReader(table), paths)
	if err != nil {
		t.Fatal(err)
	}
	if before["/var/hpp/fast"] != 90 || before["/var/hpp/with space"] != 91 || len(before) != 2 {
		t.Fatalf("MountIDs = %v", before)
	}
	if err := CheckMounts(before, before); err != nil {
		t.Fatalf("unchanged mounts: %v", err)
	}
	// Remounted: a new line on top at the same path.
	remounted, _ := MountIDs(strings.NewReader(table+"120 22 7:0 / /var/hpp/fast rw - xfs /dev/loop0 rw\n"), paths)
	var v *Violation
	if err := CheckMounts(before, remounted); !errors.As(err, &v) || !strings.Contains(err.Error(), "mounted again: mount ID 90, now 120") {
		t.Fatalf("remounted pool: %v", err)
	}
	gone, _ := MountIDs(strings.NewReader(strings.Split(table, "\n")[0]+"\n"), paths)
	if err := CheckMounts(before, gone); !errors.As(err, &v) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("unmounted pool: %v", err)
	}
}

func TestLevels(t *testing.T) {
	metrics := "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\ngo_threads 9\n"
	l, err := ReadLevels(os.Getpid(), strings.NewReader(metrics))
	if err != nil || l.Goroutines != 42 || l.FDs == 0 {
		t.Fatalf("ReadLevels = %+v, %v", l, err)
	}
	if _, err := ReadLevels(os.Getpid(), strings.NewReader("go_threads 9\n")); err == nil {
		t.Error("metrics without go_goroutines accepted")
	}
	before := Levels{FDs: 30, Goroutines: 50}
	if err := CheckLevels(before, Levels{FDs: 32, Goroutines: 53}, 5); err != nil {
		t.Fatalf("within slack: %v", err)
	}
	var v *Violation
	if err := CheckLevels(before, Levels{FDs: 80, Goroutines: 50}, 5); !errors.As(err, &v) || !strings.Contains(err.Error(), "50 leaked") {
		t.Fatalf("fd leak: %v", err)
	}
	if err := CheckLevels(before, Levels{FDs: 30, Goroutines: 90}, 5); !errors.As(err, &v) || !strings.Contains(err.Error(), "90 goroutines, 50 before the run: 40 leaked") {
		t.Fatalf("goroutine leak: %v", err)
	}
}
