//go:build linux

package prjquota

import (
	"testing"
	"unsafe"
)

// The kernel reads these structs by layout: a wrong size corrupts memory.
func TestKernelStructSizes(t *testing.T) {
	if got := unsafe.Sizeof(fsDiskQuota{}); got != 112 {
		t.Errorf("fs_disk_quota is %d bytes, the kernel's is 112", got)
	}
	if got := unsafe.Sizeof(fsxattr{}); got != 28 {
		t.Errorf("fsxattr is %d bytes, the kernel's is 28", got)
	}
}
