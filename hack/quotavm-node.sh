#!/bin/sh
# Setup script (hack/quotavm.sh -s) that makes the quota VM's guest a
# Kubernetes node for test/cluster: the host facts the harness expects on a
# real machine and the initramfs lacks. Runs as root in the guest, after
# -R moved its root to a tmpfs and -m loaded overlay, bridge and veth.
set -eu
# Names: kubelet, etcd and the API server's certificates use both.
hostname hpp-node
printf '127.0.0.1 localhost hpp-node\n::1 localhost\n' >/etc/hosts
# kubelet copies the node's resolv.conf into pods; none is needed.
: >/etc/resolv.conf
ip link set lo up
# The node IP (test/cluster takes the first global IPv4 of an interface
# that is up): a bridge with no port, the VM having no network card, and
# a default route through it for the components that want one.
ip link add vmnet0 type bridge
ip addr add 10.0.2.15/24 dev vmnet0
ip link set vmnet0 up
ip route add default dev vmnet0
# cgroup v1, one hierarchy per controller as on the hosts the harness is
# proven on (kubelet runs with failCgroupV1: false, cgroupDriver cgroupfs).
mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
for c in cpu cpuacct cpuset memory devices freezer blkio pids; do
  mkdir -p /sys/fs/cgroup/$c
  mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
mkdir -p /var/lib /var/log /run/lock /run/containerd
echo "quotavm-node: hpp-node ready for the cluster (node IP 10.0.2.15, cgroup v1)"
