// Package probes are the chaos tier's checks of the node between and after
// faults (issue 31): pool mounts kept (their mount IDs), and hpp-csi's
// open files and goroutines back to their level. Each check returns a
// *Violation naming what broke.
package probes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Violation is a broken invariant.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return "probe: " + v.Msg }

// MountIDs reads the mount ID of each path in paths from a mountinfo
// table (/proc/<pid>/mountinfo): the topmost mount at that exact path.
// A path not mounted is missing from the result.
func MountIDs(table io.Reader, paths []string) (map[string]int, error) {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	mounts, err := mountinfo.GetMountsFromReader(table, func(m *mountinfo.Info) (skip, stop bool) {
		return !want[m.Mountpoint], false
	})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range mounts {
		out[m.Mountpoint] = m.ID // later lines are mounted on top
	}
	return out, nil
}

// CheckMounts fails when a pool mounted at the start is unmounted or was
// mounted again (a new mount ID) since.
func CheckMounts(before, now map[string]int) error {
	for p, id := range before {
		got, ok := now[p]
		switch {
		case !ok:
			return &Violation{fmt.Sprintf("pool mount %s (mount ID %d) is gone", p, id)}
		case got != id:
			return &Violation{fmt.Sprintf("pool mount %s was mounted again: mount ID %d, now %d", p, id, got)}
		}
	}
	return nil
}

// Levels are a process's resources that a leak grows.
type Levels struct {
	FDs, Goroutines int
}

// ReadLevels counts pid's open file descriptors and reads go_goroutines
// from its Prometheus metrics text.
func ReadLevels(pid int, metrics io.Reader) (Levels, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return Levels{}, err
	}
	g, err := gauge(metrics, "go_goroutines")
	if err != nil {
		return Levels{}, err
	}
	return Levels{FDs: len(fds), Goroutines: int(g)}, nil
}

func gauge(metrics io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(metrics)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// CheckLevels fails when a level is above its value before the run by
// more than slack (idle connections and timers come and go).
func CheckLevels(before, after Levels, slack int) error {
	if after.FDs > before.FDs+slack {
		return &Violation{fmt.Sprintf("hpp-csi holds %d open files, %d before the run: %d leaked", after.FDs, before.FDs, after.FDs-before.FDs)}
	}
	if after.Goroutines > before.Goroutines+slack {
		return &Violation{fmt.Sprintf("hpp-csi runs %d goroutines, %d before the run: %d leaked", after.Goroutines, before.Goroutines, after.Goroutines-before.Goroutines)}
	}
	return nil
}

// Split tells a broken invariant from an error that stopped a check: a
// *Violation gives its text (a poll keeps going and reports it at its
// deadline), anything else comes back as the error (the poll stops).
func Split(err error) (violation string, stopped error) {
	var v *Violation
	if errors.As(err, &v) {
		return v.Error(), nil
	}
	return "", err
}
