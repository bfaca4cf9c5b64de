package mounter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// blkidNothingFound is blkid's exit code when it found no signature at all:
// the only answer that lets a device be formatted.
const blkidNothingFound = 2

// Signature is what a probe found on a device.
type Signature struct {
	// Empty is true only when the prober said for sure that there is
	// nothing on the device.
	Empty bool
	// Type is the filesystem or other signature (xfs, ext4, swap,
	// LVM2_member, ...); PTType the partition table type, if any.
	Type, PTType string
	// Raw is every tag the prober printed, for messages.
	Raw map[string]string
}

// String names what was found first, then every tag blkid printed.
func (s Signature) String() string {
	if s.Empty {
		return "no signature"
	}
	what := "an unnamed signature"
	switch {
	case s.Type != "" && s.PTType != "":
		what = fmt.Sprintf("%s and a %s partition table", s.Type, s.PTType)
	case s.Type != "":
		what = s.Type
	case s.PTType != "":
		what = fmt.Sprintf("a %s partition table", s.PTType)
	}
	return what + " (blkid: " + s.tags() + ")"
}

func (s Signature) tags() string {
	keys := make([]string, 0, len(s.Raw))
	for k := range s.Raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+s.Raw[k])
	}
	return strings.Join(parts, " ")
}

// Prober tells what is on a block device.
type Prober interface {
	Probe(ctx context.Context, device string) (Signature, error)
}

// Formatter makes an XFS filesystem on a device.
type Formatter interface {
	MakeXFS(ctx context.Context, device string) error
}

// BlkidProber probes with `blkid -p` (low-level superblock and partition
// table probing, no cache).
type BlkidProber struct{ Exec Executor }

func (b BlkidProber) Probe(ctx context.Context, device string) (Signature, error) {
	out, err := b.Exec.Run(ctx, "blkid", "-p", "-o", "export", device)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == blkidNothingFound {
		return Signature{Empty: true}, nil
	}
	if err != nil {
		// Any other failure (unreadable device, ambivalent signatures:
		// exit 8) is an error, never "empty": formatting on a guess
		// destroys data.
		return Signature{}, fmt.Errorf("probing %s for signatures: %w", device, err)
	}
	return parseBlkidExport(device, out)
}

func parseBlkidExport(device, out string) (Signature, error) {
	s := Signature{Raw: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k == "DEVNAME" {
			continue
		}
		s.Raw[k] = v
	}
	s.Type, s.PTType = s.Raw["TYPE"], s.Raw["PTTYPE"]
	if len(s.Raw) == 0 {
		// Exit 0 says something was found; an empty report then is not
		// "empty".
		return Signature{}, fmt.Errorf("probing %s: blkid reported a signature but printed no tags: %q", device, out)
	}
	return s, nil
}

// MkfsXFS runs mkfs.xfs without -f: if the device gained a signature since
// it was probed, mkfs.xfs refuses too.
type MkfsXFS struct{ Exec Executor }

func (m MkfsXFS) MakeXFS(ctx context.Context, device string) error {
	if _, err := m.Exec.Run(ctx, "mkfs.xfs", "-q", device); err != nil {
		return fmt.Errorf("formatting %s with XFS: %w", device, err)
	}
	return nil
}
