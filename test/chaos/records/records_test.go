package records

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// write makes a file with n records of writer 7.
func write(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records")
	w, err := OpenWriter(path, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 1; i <= n; i++ {
		seq, err := w.Append(time.Now())
		if err != nil || seq != uint64(i) {
			t.Fatalf("Append = %d, %v; want %d", seq, err, i)
		}
	}
	return path
}

func verifyFile(t *testing.T, path string, acked uint64) (Report, error) {
	t.Helper()
	return VerifyFile(path, 7, acked)
}

func patch(t *testing.T, path string, slot int, with []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(with, int64(slot-1)*Size); err != nil {
		t.Fatal(err)
	}
}

func TestIntact(t *testing.T) {
	path := write(t, 100)
	rep, err := verifyFile(t, path, 100)
	if err != nil || rep.Valid != 100 || rep.TornTail {
		t.Fatalf("Verify = %+v, %v; want 100 valid", rep, err)
	}
	// A torn write past the acknowledged ones is allowed (it never was).
	f, _ := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	torn := Record{Writer: 7, Seq: 101}.Encode()
	_, _ = f.Write(torn[:20])
	_, _ = f.Write(make([]byte, Size-20))
	_ = f.Close()
	if rep, err := verifyFile(t, path, 100); err != nil || !rep.TornTail || rep.Valid != 100 {
		t.Fatalf("with a torn unacknowledged tail: %+v, %v; want accepted", rep, err)
	}
	// The writer goes on after it, over the torn slot.
	w, err := OpenWriter(path, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := w.Append(time.Now()); err != nil || seq != 101 {
		t.Fatalf("resumed Append = %d, %v; want 101", seq, err)
	}
	_ = w.Close()
	if rep, err := verifyFile(t, path, 101); err != nil || rep.Valid != 101 || rep.TornTail {
		t.Fatalf("after resuming: %+v, %v", rep, err)
	}
}

// Each kind of lost promise is caught, so the invariant cannot pass on a
// volume that broke it.
func TestViolations(t *testing.T) {
	other := Record{Writer: 7, Seq: 40}.Encode()
	foreign := Record{Writer: 8, Seq: 50}.Encode()
	flipped := Record{Writer: 7, Seq: 30}.Encode()
	flipped[30] ^= 1
	for _, tt := range []struct {
		name  string
		edit  func(path string)
		acked uint64
		want  string
	}{
		{"a deleted record", func(p string) { patch(t, p, 50, make([]byte, Size)) }, 100, "record 50 was acknowledged (up to 100) but its slot is never written"},
		{"a flipped byte", func(p string) { patch(t, p, 30, flipped[:]) }, 100, "record 30 was acknowledged (up to 100) but its slot is damaged"},
		{"a record written in the wrong place", func(p string) { patch(t, p, 41, other[:]) }, 100, "slot 41 holds record 40 of writer 7"},
		{"another writer's record", func(p string) { patch(t, p, 50, foreign[:]) }, 100, "slot 50 holds record 50 of writer 8"},
		{"lost acknowledged tail", func(p string) { _ = os.Truncate(p, 90*Size) }, 100, "90 records on the volume, 100 acknowledged: records 91 to 100 lost"},
		{"a record after a hole", func(p string) { patch(t, p, 60, make([]byte, Size)) }, 40, "record 61 is on the volume after a hole at record 60"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := write(t, 100)
			tt.edit(path)
			_, err := verifyFile(t, path, tt.acked)
			var v *Violation
			if !errors.As(err, &v) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify error %v; want a violation saying %q", err, tt.want)
			}
		})
	}
}

// A writer does not write over a broken history.
func TestWriterRefusesDamage(t *testing.T) {
	path := write(t, 10)
	patch(t, path, 5, make([]byte, Size))
	if _, err := OpenWriter(path, 7, 0); err == nil || !strings.Contains(err.Error(), "after a hole") {
		t.Fatalf("OpenWriter on a damaged file: %v; want refused", err)
	}
}

// Verify reads a large device in chunks (the whole of it past the end).
func TestLargeDevice(t *testing.T) {
	path := write(t, 3)
	if err := os.Truncate(path, 64<<20); err != nil {
		t.Fatal(err)
	}
	rep, err := verifyFile(t, path, 3)
	if err != nil || rep.Valid != 3 {
		t.Fatalf("Verify of a 64 MiB file with 3 records: %+v, %v", rep, err)
	}
}

func TestHighestAck(t *testing.T) {
	out := []byte("ack 1\nack 2\nerror: syncing record 3: no space left on device\nack 3\nack 12\nack x\n")
	if got := HighestAck(out); got != 12 {
		t.Fatalf("HighestAck = %d, want 12", got)
	}
	if got := HighestAck(nil); got != 0 {
		t.Fatalf("HighestAck(nothing) = %d, want 0", got)
	}
}
