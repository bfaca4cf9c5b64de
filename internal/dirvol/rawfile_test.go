package dirvol_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

func TestOSReadFileRefusesHugeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := dirvol.OS().ReadFile(p)
	if want := "read " + p + ": larger than 1048576 bytes"; err == nil || err.Error() != want {
		t.Errorf("ReadFile(2 MiB) = %v, want %s", err, want)
	}
}

func TestOSReadFileReadsAll(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	want := make([]byte, 5000) // more than the first buffer
	for i := range want {
		want[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := dirvol.OS().ReadFile(p)
	if err != nil || string(got) != string(want) {
		t.Errorf("ReadFile = %d bytes, %v; want %d bytes", len(got), err, len(want))
	}
	if _, err := dirvol.OS().ReadFile(p + ".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want not exist", err)
	}
}

func TestOSWriteFileNeverReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := dirvol.OS().WriteFile(p, []byte("new"), 0o600)
	if !errors.Is(err, fs.ErrExist) || err.Error() != "open "+p+": file exists" {
		t.Errorf("WriteFile over an existing file = %v, want open ...: file exists", err)
	}
	if data, _ := os.ReadFile(p); string(data) != "old" {
		t.Errorf("existing file now holds %q", data)
	}
}

func TestOSRenameAndSyncErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	err := dirvol.OS().Rename(src, dst)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "rename "+src+" "+dst+": no such file or directory" {
		t.Errorf("Rename(missing) = %v", err)
	}
	for name, sync := range map[string]func(string) error{"SyncFile": dirvol.OS().SyncFile, "SyncDir": dirvol.OS().SyncDir} {
		if err := sync(src); !errors.Is(err, fs.ErrNotExist) || err.Error() != "open "+src+": no such file or directory" {
			t.Errorf("%s(missing) = %v", name, err)
		}
	}
	if err := dirvol.OS().SyncDir(dir); err != nil {
		t.Errorf("SyncDir(existing) = %v", err)
	}
}
