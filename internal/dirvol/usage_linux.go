package dirvol

import (
	"fmt"
	"io/fs"
	"syscall"
)

// statInfo is the part of struct stat the usage walk needs.
type statInfo struct {
	dev, ino, nlink uint64
	blocks          int64
	dir             bool
}

func statOf(fi fs.FileInfo) (statInfo, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statInfo{}, fmt.Errorf("%s: no stat information (%T)", fi.Name(), fi.Sys())
	}
	return statInfo{
		dev:    st.Dev,
		ino:    st.Ino,
		nlink:  uint64(st.Nlink),
		blocks: st.Blocks,
		dir:    fi.IsDir(),
	}, nil
}
