// Package quotanode is the node tier of enforced volume sizes (issue 22):
// the real hpp-csi on real loop devices, XFS (mounted prjquota) and ext4
// (features project,quota, mounted prjquota), as root.
//
// What it proves, on each filesystem: a 100 MiB volume refuses the 101st
// MiB (ext4: EDQUOT; XFS reports a project over its limit as ENOSPC) to a
// writer without CAP_SYS_RESOURCE (the test binary re-run as nobody, as a
// pod is: ext4 lets that capability past any quota); statfs inside the published volume shows 100 MiB;
// expanded online to 300 MiB while a writer keeps its file open, a 250 MiB
// write through that file succeeds; deletion frees the project ID and the
// blocks; a snapshot, a restore from it and a clone each stand alone (the
// restore and the clone get their own ID on every copied entry and their
// own limit, the source's usage does not move, the snapshot carries no
// volume's ID, a write into the clone stops at the clone's limit); a
// directory the replaced driver made has no limit and says so (stats with
// the pool's free space, health SizeNotEnforced) until an expansion gives it
// an ID over everything inside and a limit the kernel enforces; and SIGKILL
// of hpp-csi after every step of create, clone, expand, adoption and
// delete, then a restart and the CO's retry, leaves limits and IDs
// consistent and nothing leaked. And a pool on a filesystem not prepared
// for enforcement (XFS without prjquota; ext4 without the project,quota
// features, or with them but without prjquota) is not ready: Probe says
// so, it offers no capacity, and CreateVolume is Unavailable naming the
// mount option or feature to add.
//
// Where the kernel cannot give project quotas (this development host: no
// CONFIG_XFS_QUOTA, no QFMT_V2) each filesystem's tests skip with what the
// kernel answered, found by trying (mkfs, mount -o prjquota, quotactl),
// never from a version number. In the VM tier (hack/quotavm.sh's /quotavm/
// layout, or HPP_QUOTA_TIER=vm) under CI=true that skip is a failure
// instead: the VM tier exists to run them.
//
// # Building and running the binary elsewhere (the VM tier)
//
// The test binary and hpp-csi are built on the host and copied in; the VM
// needs no Go toolchain. From the repository root, `make quota-binaries`
// runs exactly:
//
//	(cd cmd/hpp-csi && CGO_ENABLED=0 go build -tags hpp_killpoints -o ../../_output/quotanode/hpp-csi .)
//	(cd test && CGO_ENABLED=0 go test -c -o ../_output/quotanode/quotanode.test ./quotanode/)
//
// hpp-csi must be the hpp_killpoints build: it SIGKILLs itself after the
// step named by $HPP_KILL_AT, which the crash test sets per restart. The
// test takes it from $HPP_CSI_BIN, else from a file named hpp-csi in the
// test binary's directory (any mode: it is copied and made executable, so
// hack/quotavm.sh, which runs every executable file there, can carry it
// as a non-executable file beside the test binary). Run as
// root with $TMPDIR (default /tmp) on a filesystem with 1 GiB free: the
// loop images are sparse files of 512 MiB, one filesystem at a time, of
// which about 400 MiB is really written. It takes 40 s in the VM.
//
//	HPP_CSI_BIN=/path/hpp-csi HPP_QUOTA_TIER=vm CI=true ./quotanode.test -test.v -test.timeout 30m
//
// Tools needed in the VM: losetup (util-linux), mkfs.xfs (xfsprogs),
// mkfs.ext4 (e2fsprogs), and a kernel with loop, XFS with CONFIG_XFS_QUOTA,
// ext4 with CONFIG_QUOTA and CONFIG_QFMT_V2 (Debian's has all). The binary
// prints one "--- PASS"/"--- SKIP" line per filesystem and ends with PASS
// or FAIL; its exit status is 0 only when every test passed or skipped.
//
// `make quota-vm-tests` (in `make test`) builds both and runs them in the
// quota VM (hack/quotavm.sh), after its self-check; on the host,
// `make quota-tests` runs them with -race where the kernel has quotas.
package quotanode
