// Package host is hpp-csi's OS adapters: the real mounts and the real
// host filesystem, behind the small interfaces the pool runtime declares
// (pools.Mounter, pools.HostFS). Nothing here knows of pools or of CSI;
// everything here is a system call or a walk that tests replace with fakes.
package host
