package records

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// VerifyFile is Verify of a records file, as long as it is.
func VerifyFile(path string, writer uint32, acked uint64) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return Report{}, err
	}
	return Verify(f, fi.Size(), writer, acked)
}

// HighestAck is the highest record number a writer's output acknowledged
// (its "ack N" lines, test/chaos/writer); 0 when there is none.
func HighestAck(out []byte) uint64 {
	var acked uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > acked {
				acked = n
			}
		}
	}
	return acked
}

// BuildWriter builds test/chaos/writer into out, static: the tiers' pods
// run it from a hostPath in the busybox image.
func BuildWriter(ctx context.Context, out string) error {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return fmt.Errorf("build the records writer: cannot locate the source tree")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "writer")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the records writer in %s: %w: %s", cmd.Dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}
