package cluster

import (
	"context"
	"fmt"
)

// Images for the Kubernetes e2e suite (test/conformance). The suite names
// its images under a registry that KUBE_TEST_REPO_LIST can point at a
// local name; these builders make images that answer to those names from
// files on this machine, since there is no registry to pull from.

// hostBusybox is Debian's busybox-static, the source of every busybox image.
const hostBusybox = "/bin/busybox"

// BusyboxImageAs is the harness's busybox image (Debian's static busybox, a
// symlink per applet, command sh) under another name. The storage e2e
// tests use their busybox, nginx and glibc-dns-testing images only for a
// shell and coreutils (sh, cat, ls, mount, ...), which this provides.
func BusyboxImageAs(ctx context.Context, ref string) (Image, error) {
	img, err := busyboxImage(ctx, hostCommander{}, hostBusybox)
	if err != nil {
		return Image{}, err
	}
	img.Ref = ref
	return img, img.Validate()
}

// AgnhostImage is the e2e suite's agnhost image built from an agnhost
// binary (static, from k8s.io/kubernetes/test/images/agnhost): /agnhost is
// the entrypoint and `pause` the default command, as in the upstream
// image, and the busybox applets sit in /bin because tests exec shell
// commands in agnhost pods (the storage host-exec pod runs nsenter, sh,
// test and find).
func AgnhostImage(ctx context.Context, ref, agnhost string) (Image, error) {
	bin, err := BinaryImage(ref, agnhost)
	if err != nil {
		return Image{}, err
	}
	if bin.Entrypoint[0] != "/agnhost" {
		return Image{}, fmt.Errorf("image %s binary %q: want a file named agnhost (the e2e suite runs /agnhost)", ref, agnhost)
	}
	bb, err := BusyboxImageAs(ctx, ref)
	if err != nil {
		return Image{}, err
	}
	bin.Files = append(bin.Files, bb.Files...)
	bin.Cmd = []string{"pause"}
	return bin, bin.Validate()
}
