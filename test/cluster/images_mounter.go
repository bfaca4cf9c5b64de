package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// MounterTools are the host tools hpp-mounter runs (its Dockerfile installs
// xfsprogs and util-linux for them).
var MounterTools = []string{"blkid", "mkfs.xfs"}

// MounterImage is the local cluster's stand-in for hpp-mounter's Dockerfile
// image: the static hpp-mounter binary as /usr/bin/hpp-mounter (and
// upstream's name /usr/bin/mounter), plus this machine's blkid and mkfs.xfs
// with every shared library ldd lists, at the same paths. No image builder
// is needed; `make deps` installs the tools.
func MounterImage(ctx context.Context, ref, binary string) (Image, error) {
	img := Image{
		Ref:        ref,
		Entrypoint: []string{"/usr/bin/hpp-mounter"},
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Files: []ImageFile{
			{Path: "/usr/bin/hpp-mounter", Source: binary, Mode: 0o755},
			{Path: "/usr/bin/mounter", Symlink: "hpp-mounter"},
			{Path: "/tmp"},
		},
	}
	img, err := WithHostTools(ctx, img, MounterTools...)
	if err != nil {
		return Image{}, fmt.Errorf("mounter image: %w", err)
	}
	return img, img.Validate()
}

// WithHostTools adds this machine's tools to img at /usr/sbin/<tool>,
// with every shared library ldd lists at the path the loader asks for.
func WithHostTools(ctx context.Context, img Image, tools ...string) (Image, error) {
	cmd := hostCommander{}
	libs := map[string]bool{}
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			return Image{}, fmt.Errorf("%s not found (install xfsprogs and util-linux: make deps): %w", tool, err)
		}
		img.Files = append(img.Files, ImageFile{Path: "/usr/sbin/" + tool, Source: p, Mode: 0o755})
		out, err := cmd.Run(ctx, "ldd", p)
		if err != nil {
			return Image{}, err
		}
		for _, lib := range lddPaths(out) {
			libs[lib] = true
		}
	}
	sorted := make([]string, 0, len(libs))
	for l := range libs {
		sorted = append(sorted, l)
	}
	sort.Strings(sorted)
	for _, l := range sorted {
		// Copied as regular files at the path the loader asks for; the
		// host's symlinks (/lib64/ld-linux..., merged /usr) are followed.
		img.Files = append(img.Files, ImageFile{Path: filepath.Clean(l), Source: l})
	}
	return img, nil
}

// lddPaths returns the absolute library paths in ldd's output: the
// "name => /path (addr)" lines and the loader's "/path (addr)" line.
func lddPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	return paths
}
