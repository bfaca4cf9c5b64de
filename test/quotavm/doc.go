// Package quotavm is the quota VM tier's self-check (make quota-vm-tests):
// project quotas on XFS and ext4 loop devices, enforced with EDQUOT. It runs
// inside the VM that hack/quotavm.sh boots, whose kernel has the quota
// support this machine's may lack; run directly on a kernel without it, it
// skips with the reason (fails under CI=true).
package quotavm
