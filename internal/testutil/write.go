package testutil

import "os"

// WriteSynced writes n bytes to path in 1 MiB chunks and syncs, returning how many
// bytes the filesystem took and the first error: the write, the sync or
// the close.
func WriteSynced(path string, n int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	var written int64
	for written < n {
		k, err := f.Write(chunk[:min(int64(len(chunk)), n-written)])
		written += int64(k)
		if err != nil {
			_ = f.Close()
			return written, err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return written, err
	}
	return written, f.Close()
}
