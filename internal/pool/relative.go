package pool

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

// resolveRelative makes every relative path and snapshotPath absolute by
// joining it to workDir, in place. A relative path must have no ".."
// element, so it stays below workDir; each entry that breaks the rule is reported and marked bad,
// so the absolute-path checks that follow do not report it twice.
func resolveRelative(pools []Pool, bad map[int]bool, workDir string) []error {
	var errs []error
	for i := range pools {
		if bad[i] {
			continue
		}
		prefix := fmt.Sprintf("%s[%d]", docField, i)
		for _, f := range []struct {
			name string
			p    *string
		}{{"path", &pools[i].Path}, {"snapshotPath", &pools[i].SnapshotPath}} {
			if err := resolveOne(prefix+"."+f.name, f.p, workDir); err != nil {
				errs = append(errs, err)
				bad[i] = true
			}
		}
	}
	return errs
}

func resolveOne(field string, p *string, workDir string) error {
	v := *p
	if v == "" || filepath.IsAbs(v) || strings.IndexByte(v, 0) >= 0 {
		return nil // the absolute-path checks word these
	}
	switch {
	case workDir == "":
		return nil // the pool-path rule refuses it: not absolute
	case fieldrule.HasBackstep(v):
		return fieldErr(field, "%q must not contain a '..' element", v)
	}
	// Joined, then cleaned and checked as any absolute path: a trailing
	// '/' is accepted here as everywhere (fieldrule.CheckPoolPath).
	*p = filepath.Join(workDir, v)
	return nil
}
