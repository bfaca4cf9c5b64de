package mounter

import (
	"fmt"

	"go.uber.org/zap"
)

// maxPeel bounds Peel: more stacked mounts than this is a loop, not a leak.
const maxPeel = 64

// Release unmounts the pool if, and only if, the top mount at the target is
// the PVC's: a mount that is not ours is left for a person to look at.
// Never a lazy detach: a busy pool stays mounted and the error says so.
func (m *Mounter) Release() error {
	want, top, err := m.current()
	if err != nil {
		return err
	}
	if top == nil {
		return nil
	}
	if identityOf(top) != want {
		m.log.Warn("pool target is mounted from something else; left as it is", zap.String("target", m.cfg.Target), zap.String("mount", describe(top)))
		return nil
	}
	return m.sys.Unmount(m.cfg.target())
}

// Peel unmounts everything stacked at the host path target (seen under
// hostRoot) until it is no longer a mount point. Nothing mounted (also: no
// such directory, which is never a mount point) is success: a cleanup Job
// may run it any number of times.
func Peel(sys Sys, hostRoot, target string, log *zap.Logger) error {
	t := hostJoin(hostRoot, target)
	for i := 0; ; i++ {
		mounts, err := sys.Mounts()
		if err != nil {
			return err
		}
		top := mountAt(mounts, t)
		if top == nil {
			log.Info("pool target is not mounted", zap.String("target", target), zap.Int("unmounted", i))
			return nil
		}
		if i == maxPeel {
			return fmt.Errorf("%s still mounted after %d unmounts (now %s)", target, maxPeel, describe(top))
		}
		log.Info("unmounting the pool target", zap.String("target", target), zap.String("mount", describe(top)))
		if err := sys.Unmount(t); err != nil {
			return err
		}
	}
}
