package probes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// StoreDirs are the directories of a pool's volumes directory that hold
// only work under way (staging) or not yet purged (trash): empty once
// every create and delete has finished.
func StoreDirs(volumesDir string) []string {
	return []string{filepath.Join(volumesDir, dirvol.StagingDir), filepath.Join(volumesDir, dirvol.TrashDir)}
}

// CheckLeftovers fails when a deleted volume's directory is still there
// (volumeDirs: one per deleted volume) or when a store directory (a
// pool's staging or trash) still holds an entry.
func CheckLeftovers(volumeDirs, storeDirs []string) error {
	var left []string
	for _, d := range volumeDirs {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			left = append(left, d)
		}
	}
	for _, d := range storeDirs {
		entries, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			left = append(left, filepath.Join(d, e.Name()))
		}
	}
	if len(left) > 0 {
		return &Violation{fmt.Sprintf("deleted volumes left %d entries on disk: %s", len(left), strings.Join(left, ", "))}
	}
	return nil
}

// bareInternal matches an error text that names no cause: a gRPC Internal
// with nothing after it, or "internal error" alone at its end.
var bareInternal = regexp.MustCompile(`(?i)(code = Internal desc = *$|(^|: )internal error\.?$)`)

// CheckMessage fails when a warning a user sees (an event, a claim
// condition) names no cause.
func CheckMessage(what, msg string) error {
	if bareInternal.MatchString(strings.TrimSpace(msg)) {
		return &Violation{fmt.Sprintf("%s names no cause: %q", what, msg)}
	}
	return nil
}
