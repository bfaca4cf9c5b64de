package dirvol

import (
	"errors"
	"hash/fnv"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// lockSlots spreads ids over byte offsets of the lock file. Two ids that
// share a slot only wait for each other; nothing breaks.
const lockSlots = 1 << 30

// LockID takes an open-file-description (OFD) write lock on one byte of
// lockFile, chosen by id. OFD locks belong to the open file, not to the
// process, so two Stores in one process exclude each other as two processes
// do; and they are fcntl byte-range locks, which NFS (NLM for v3, the
// protocol itself for v4) carries to the server, so hpp-csi processes on
// different nodes sharing a pool exclude each other too. Closing the
// descriptor releases the lock, also when the process dies.
func (osFS) LockID(lockFile, id string) (func() error, error) {
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, id)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(h.Sum64() % lockSlots), Len: 1}
	for {
		err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &lk)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, &os.PathError{Op: "lock", Path: lockFile, Err: err}
	}
	return f.Close, nil
}
