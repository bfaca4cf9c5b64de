package records

import (
	"fmt"
	"os"
	"time"
)

// Writer appends one writer's records to a file or a block device.
type Writer struct {
	f    *os.File
	id   uint32
	next uint64
}

// OpenWriter opens path (created if missing; a block device must exist)
// and continues after the records already there, so a writer restarted
// with its pod goes on numbering. The records there are verified first:
// a writer never writes over a broken history.
func OpenWriter(path string, id uint32, capacity int64) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	size := capacity
	if size == 0 {
		fi, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		size = fi.Size()
	}
	rep, err := Verify(f, size, id, 0)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Writer{f: f, id: id, next: rep.Valid + 1}, nil
}

// Append writes the next record and makes it durable (fdatasync); only
// then may the caller acknowledge the number it returns.
func (w *Writer) Append(now time.Time) (uint64, error) {
	seq := w.next
	b := Record{Writer: w.id, Seq: seq, UnixNano: now.UnixNano()}.Encode()
	if _, err := w.f.WriteAt(b[:], int64(seq-1)*Size); err != nil {
		return 0, fmt.Errorf("writing record %d: %w", seq, err)
	}
	if err := w.f.Sync(); err != nil {
		return 0, fmt.Errorf("syncing record %d: %w", seq, err)
	}
	w.next++
	return seq, nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }
