package mounter

import (
	"context"
	"fmt"

	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"
)

// Ensure brings the pool to "mounted from the PVC, marker written". Already
// mounted from the PVC: only the marker is checked. Mounted from anything
// else: refused, never stacked. It returns whether it mounted anything.
func (m *Mounter) Ensure(ctx context.Context) (mounted bool, err error) {
	src, err := m.sys.StatSource(m.cfg.Source)
	if err != nil {
		return false, fmt.Errorf("--storagePoolPath %s: %w", m.cfg.Source, err)
	}
	mounts, err := m.sys.Mounts()
	if err != nil {
		return false, err
	}
	want, err := m.wantIdentity(src, mounts)
	if err != nil {
		return false, err
	}
	target := m.cfg.target()
	if top := mountAt(mounts, target); top != nil {
		if identityOf(top) != want {
			return false, refused("%s is already mounted from %s, not from the pool PVC %s (%s); hpp-mounter does not stack mounts: unmount it (hpp-mounter unmount) or fix the pool path",
				m.cfg.Target, describe(top), m.cfg.Source, want)
		}
		return false, m.mark(target)
	}
	if err := m.sys.MkdirAll(target); err != nil {
		return false, err
	}
	if src.Kind == KindBlock {
		err = m.mountBlock(ctx, target)
	} else {
		err = m.bindDirectory(mounts, want, target)
	}
	if err != nil {
		return false, err
	}
	if err := m.verifyMounted(want, target); err != nil {
		return true, err
	}
	return true, m.mark(target)
}

// wantIdentity is the identity the pool mount must have: the block device
// itself, or whatever the kubelet mounted at Source.
func (m *Mounter) wantIdentity(src SourceInfo, mounts []*mountinfo.Info) (Identity, error) {
	if src.Kind == KindBlock {
		return Identity{Major: src.Major, Minor: src.Minor, Root: "/"}, nil
	}
	at := mountAt(mounts, m.cfg.Source)
	if at == nil {
		return Identity{}, fmt.Errorf("--storagePoolPath %s is a directory but not a mount point: the pool PVC is not mounted there (check the pod's volumeMounts)", m.cfg.Source)
	}
	return identityOf(at), nil
}

func (m *Mounter) bindDirectory(mounts []*mountinfo.Info, want Identity, target string) error {
	host, err := hostMountOf(mounts, want, m.cfg.HostRoot, m.cfg.Source, target)
	if err != nil {
		return err
	}
	m.log.Info("bind-mounting the pool PVC", zap.String("from", host.Mountpoint), zap.String("fstype", host.FSType),
		zap.String("source", host.Source), zap.String("target", m.cfg.Target))
	return m.sys.Bind(host.Mountpoint, target)
}

func (m *Mounter) mountBlock(ctx context.Context, target string) error {
	dev := m.cfg.Source
	sig, err := m.probe.Probe(ctx, dev)
	if err != nil {
		return err
	}
	if sig.Empty {
		m.log.Info("formatting the empty pool device with XFS", zap.String("device", dev))
		// A SIGTERM must not kill mkfs halfway: a half-written superblock
		// makes the device neither empty nor mountable. The executor's own
		// timeout still bounds it.
		if err := m.mkfs.MakeXFS(context.WithoutCancel(ctx), dev); err != nil {
			return err
		}
		if sig, err = m.probe.Probe(ctx, dev); err != nil {
			return err
		}
	}
	if sig.Type != "xfs" || sig.PTType != "" {
		return refused("device %s holds %s, not an XFS filesystem: hpp-mounter formats only devices without any signature and mounts only XFS; the device was left untouched (wipe it by hand if its content is not needed)",
			dev, sig)
	}
	m.log.Info("mounting the pool device", zap.String("device", dev), zap.String("target", m.cfg.Target),
		zap.String("options", m.cfg.xfsMountData()))
	return m.sys.MountXFS(dev, target, m.cfg.xfsMountData())
}

// verifyMounted checks, after a mount, that the top of the target's mount
// stack is the PVC: anything else means the mount went elsewhere.
func (m *Mounter) verifyMounted(want Identity, target string) error {
	mounts, err := m.sys.Mounts()
	if err != nil {
		return err
	}
	top := mountAt(mounts, target)
	if top == nil || identityOf(top) != want {
		return fmt.Errorf("after mounting, %s does not show the pool PVC (%s)", m.cfg.Target, want)
	}
	return nil
}

func (m *Mounter) mark(target string) error {
	if err := m.sys.Marker(target, m.cfg.Pool, m.cfg.Node); err != nil {
		return fmt.Errorf("pool mounted at %s, but its marker could not be written: %w", m.cfg.Target, err)
	}
	return nil
}

// Ready says why the pool is not usable right now, or nil: mounted from the
// PVC and marked. It only reads.
func (m *Mounter) Ready() error {
	want, top, err := m.current()
	if err != nil {
		return err
	}
	if top == nil {
		return fmt.Errorf("%s is not mounted", m.cfg.Target)
	}
	if identityOf(top) != want {
		return fmt.Errorf("%s is mounted from %s, not from the pool PVC (%s)", m.cfg.Target, describe(top), want)
	}
	return m.sys.CheckMarker(m.cfg.target(), m.cfg.Pool)
}

// current reads the identity the pool mount must have and the mount now on
// top of the target (nil when none).
func (m *Mounter) current() (Identity, *mountinfo.Info, error) {
	src, err := m.sys.StatSource(m.cfg.Source)
	if err != nil {
		return Identity{}, nil, fmt.Errorf("--storagePoolPath %s: %w", m.cfg.Source, err)
	}
	mounts, err := m.sys.Mounts()
	if err != nil {
		return Identity{}, nil, err
	}
	want, err := m.wantIdentity(src, mounts)
	if err != nil {
		return Identity{}, nil, err
	}
	return want, mountAt(mounts, m.cfg.target()), nil
}
