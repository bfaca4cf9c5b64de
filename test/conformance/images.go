package conformance

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hostpath-provisioner/hpp/test/cluster"
)

// Registry is where the suite is told (KUBE_TEST_REPO_LIST) to find its
// e2e-test-images; nothing serves it: the images are imported into the
// node's containerd under these names and pods never pull.
const Registry = "localhost/e2e-test-images"

// repoList is the KUBE_TEST_REPO_LIST file's content.
const repoList = "promoterE2eRegistry: " + Registry + "\n"

// imageKinds are the suite's images that the selected storage tests run,
// by name under Registry: agnhost for host-exec and most helper pods, the
// others only for a shell and coreutils, which busybox provides.
var imageKinds = map[string]string{
	"agnhost":           "agnhost",
	"busybox":           "busybox",
	"nginx":             "busybox",
	"glibc-dns-testing": "busybox",
}

// neededImages picks, from `e2e.test --list-images` run with
// KUBE_TEST_REPO_LIST, every reference under Registry of the images this
// tier builds, so their tags always follow the pinned suite. The suite
// lists some names with two tags (e.g. agnhost 2.66.1 and an older one
// for version-skew tests); both are built, as the content is ours anyway.
// Each name must be listed at least once.
func neededImages(listImages string) ([]string, error) {
	var refs []string
	seen := map[string]bool{}
	for _, line := range strings.Fields(listImages) {
		dir, nameTag := path.Split(line)
		name, _, ok := strings.Cut(nameTag, ":")
		if !ok || strings.TrimSuffix(dir, "/") != Registry {
			continue
		}
		if _, want := imageKinds[name]; want && !slices.Contains(refs, line) {
			refs = append(refs, line)
			seen[name] = true
		}
	}
	var missing []string
	for name := range imageKinds {
		if !seen[name] {
			missing = append(missing, Registry+"/"+name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("e2e.test --list-images names none of %q (was KUBE_TEST_REPO_LIST honoured? did the suite rename an image?)", missing)
	}
	return refs, nil
}

// buildImages makes the images for the references neededImages found.
func buildImages(ctx context.Context, refs []string, agnhost string) ([]cluster.Image, error) {
	var out []cluster.Image
	for _, ref := range refs {
		name, _, _ := strings.Cut(path.Base(ref), ":")
		var img cluster.Image
		var err error
		if imageKinds[name] == "agnhost" {
			img, err = cluster.AgnhostImage(ctx, ref, agnhost)
		} else {
			img, err = cluster.BusyboxImageAs(ctx, ref)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}
