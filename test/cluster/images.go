package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Image is a single-layer container image built from host files, imported
// into containerd without a registry. Pods use it with
// imagePullPolicy: Never.
type Image struct {
	// Ref is the name pods use, with a domain and a tag, e.g.
	// "localhost/hpp/busybox:1".
	Ref        string
	Files      []ImageFile
	Entrypoint []string
	Cmd        []string
	Env        []string
	// User is the image's USER ("1001", "65532:65532"); empty runs as root.
	// A pod with runAsNonRoot and no runAsUser needs a numeric one.
	User string
}

// ImageFile is one entry of the image's filesystem: a copy of a host file
// (Source), literal content (Data), a symlink (Symlink) or, with none of
// them, a directory.
type ImageFile struct {
	// Path inside the image, absolute.
	Path    string
	Source  string
	Data    []byte
	Symlink string
	Mode    os.FileMode
}

// Validate checks the reference and every file.
func (img Image) Validate() error {
	var errs []error
	name, tag, ok := strings.Cut(img.Ref, ":")
	if !ok || tag == "" || !strings.Contains(name, "/") || !strings.Contains(strings.SplitN(name, "/", 2)[0], ".") && !strings.HasPrefix(name, "localhost/") {
		errs = append(errs, fmt.Errorf("image ref %q: want domain/name:tag, e.g. localhost/hpp/busybox:1", img.Ref))
	}
	for i, f := range img.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			errs = append(errs, fmt.Errorf("image %s files[%d] path %q: must be absolute and clean", img.Ref, i, f.Path))
		}
		set := 0
		for _, b := range []bool{f.Source != "", f.Data != nil, f.Symlink != ""} {
			if b {
				set++
			}
		}
		if set > 1 {
			errs = append(errs, fmt.Errorf("image %s files[%d] %s: only one of source, data, symlink", img.Ref, i, f.Path))
		}
		if f.Source != "" && !filepath.IsAbs(f.Source) {
			errs = append(errs, fmt.Errorf("image %s files[%d] source %q: must be absolute", img.Ref, i, f.Source))
		}
	}
	return errors.Join(errs...)
}

// writeDockerArchive writes img as a docker-archive tar (manifest.json, a
// config named by its digest, one layer), the format `ctr images import`
// takes.
func writeDockerArchive(img Image, out string) error {
	if err := img.Validate(); err != nil {
		return err
	}
	layer, err := layerTar(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	layerSum := sha256.Sum256(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"Env":        append([]string{"PATH=/bin:/usr/bin:/sbin:/usr/sbin"}, img.Env...),
			"User":       img.User,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(layerSum[:])}},
	})
	if err != nil {
		return fmt.Errorf("image %s config: %w", img.Ref, err)
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{img.Ref},
		"Layers":   []string{"layer.tar"},
	}})
	if err != nil {
		return fmt.Errorf("image %s manifest: %w", img.Ref, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, config}, {"layer.tar", layer}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("image %s archive: %w", img.Ref, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("image %s archive: %w", img.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image %s archive: %w", img.Ref, err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// layerTar builds the layer; parent directories of every file are added
// so the runtime finds a complete tree.
func layerTar(files []ImageFile) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, f := range files {
		if f.Source == "" && f.Data == nil && f.Symlink == "" {
			dirs[f.Path] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirList {
		mode := int64(0o755)
		if d == "/tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Mode: mode, Typeflag: tar.TypeDir}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		name := strings.TrimPrefix(f.Path, "/")
		switch {
		case f.Symlink != "":
			if err := tw.WriteHeader(&tar.Header{Name: name, Linkname: f.Symlink, Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
				return nil, err
			}
		case f.Source != "" || f.Data != nil:
			data := f.Data
			mode := f.Mode
			if f.Source != "" {
				var err error
				if data, err = os.ReadFile(f.Source); err != nil {
					return nil, fmt.Errorf("file %s: %w", f.Path, err)
				}
				if mode == 0 {
					fi, err := os.Stat(f.Source)
					if err != nil {
						return nil, fmt.Errorf("file %s: %w", f.Path, err)
					}
					mode = fi.Mode().Perm()
				}
			}
			if mode == 0 {
				mode = 0o644
			}
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(mode.Perm()), Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image references of the images every cluster has.
const (
	PauseImage   = "localhost/hpp/pause:1"
	BusyboxImage = "localhost/hpp/busybox:1"
)

// busyboxImage is Debian's static busybox with a symlink per applet.
func busyboxImage(ctx context.Context, cmd Commander, busybox string) (Image, error) {
	out, err := cmd.Run(ctx, busybox, "--list")
	if err != nil {
		return Image{}, fmt.Errorf("busybox image: %w", err)
	}
	img := Image{
		Ref:   BusyboxImage,
		Files: []ImageFile{{Path: "/bin/busybox", Source: busybox, Mode: 0o755}, {Path: "/tmp"}},
		Cmd:   []string{"sh"},
	}
	for _, applet := range strings.Fields(out) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		img.Files = append(img.Files, ImageFile{Path: "/bin/" + applet, Symlink: "busybox"})
	}
	return img, nil
}

// buildPauseImage wraps prebuilt (Binaries.Pause) in an image or, when it
// is empty, compiles test/images/pause (found next to this source file:
// the harness then runs from a checkout). The Go toolchain runs with the
// caller's environment so that it uses the same caches.
func buildPauseImage(ctx context.Context, outDir, prebuilt string) (Image, error) {
	bin := prebuilt
	if bin == "" {
		bin = filepath.Join(outDir, "pause")
		if err := buildTestImageCommand(ctx, "pause", bin); err != nil {
			return Image{}, fmt.Errorf("pause image: %w", err)
		}
	}
	return Image{
		Ref:        PauseImage,
		Files:      []ImageFile{{Path: "/pause", Source: bin, Mode: 0o755}},
		Entrypoint: []string{"/pause"},
	}, nil
}

// buildTestImageCommand builds the main package test/images/<name> into
// bin, static (CGO_ENABLED=0): the images hold nothing else. The flags are
// make test's one build configuration (the Makefile says why), so the
// standard library compiled for the tests serves it.
func buildTestImageCommand(ctx context.Context, name, bin string) error {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return errors.New("cannot locate the harness source")
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(filepath.Dir(self), "..", "images", name)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w: %s", build.Dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// importImage imports a docker-archive into containerd's k8s.io namespace.
func importImage(ctx context.Context, cmd Commander, ctr, sock, archive string) error {
	_, err := cmd.Run(ctx, ctr, "--address", sock, "-n", "k8s.io", "images", "import", archive)
	return err
}

// BinaryImage is an image holding one static binary (e.g. an hpp
// component built with CGO_ENABLED=0) as /<base name>, its entrypoint, plus
// /tmp. Import it with ImportImage or Options.Images.
func BinaryImage(ref, binary string) (Image, error) {
	if !filepath.IsAbs(binary) {
		return Image{}, fmt.Errorf("image %s binary %q: must be absolute", ref, binary)
	}
	if _, err := os.Stat(binary); err != nil {
		return Image{}, fmt.Errorf("image %s binary: %w", ref, err)
	}
	target := "/" + filepath.Base(binary)
	img := Image{Ref: ref, Entrypoint: []string{target}, Files: []ImageFile{{Path: target, Source: binary, Mode: 0o755}, {Path: "/tmp"}}}
	return img, img.Validate()
}
