package migrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Backups keeps one YAML file per PV, <dir>/<pv name>.yaml: the PV exactly
// as it was read before migration touched it. One file per PV, written with
// temp name + fsync + rename, so a kill never leaves a torn or half-written
// backup, and a rerun never has to rewrite the others.
type Backups struct{ Dir string }

func (b Backups) path(name string) string { return filepath.Join(b.Dir, name+".yaml") }

// Load returns the backup of PV name, or (nil, nil) when there is none.
func (b Backups) Load(name string) (*corev1.PersistentVolume, error) {
	data, err := os.ReadFile(b.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backup of PV %s: %w", name, err)
	}
	pv := &corev1.PersistentVolume{}
	if err := yaml.UnmarshalStrict(data, pv); err != nil {
		return nil, fmt.Errorf("backup %s: %w", b.path(name), err)
	}
	if pv.Name != name {
		return nil, fmt.Errorf("backup %s: metadata.name is %q, not %q", b.path(name), pv.Name, name)
	}
	return pv, nil
}

// Names lists the PVs that have a backup, sorted.
func (b Backups) Names() ([]string, error) {
	entries, err := os.ReadDir(b.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backup dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(n, ".yaml") && !strings.HasPrefix(n, ".") {
			names = append(names, strings.TrimSuffix(n, ".yaml"))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Ensure writes the backup of live unless one of the same object (same
// UID) is already there: that one was taken before this tool changed
// anything (the reclaim policy above all), so it must not be replaced by
// the half-migrated object. A backup of another object with that name (a
// PV deleted and re-created since, e.g. by rollback) is replaced.
func (b Backups) Ensure(live *corev1.PersistentVolume) (written bool, err error) {
	old, err := b.Load(live.Name)
	if err != nil {
		return false, err
	}
	if old != nil && old.UID == live.UID {
		return false, nil
	}
	return true, b.write(live)
}

func (b Backups) write(pv *corev1.PersistentVolume) error {
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	obj := pv.DeepCopy()
	obj.APIVersion, obj.Kind = "v1", "PersistentVolume"
	obj.ManagedFields = nil
	data, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	tmp, err := os.CreateTemp(b.Dir, "."+pv.Name+".*.tmp")
	if err != nil {
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	// After a successful rename there is nothing left to remove.
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	if err := os.Rename(tmp.Name(), b.path(pv.Name)); err != nil {
		return fmt.Errorf("backup of PV %s: %w", pv.Name, err)
	}
	// The rename must be durable before the PV is changed.
	d, err := os.Open(b.Dir)
	if err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	return nil
}
