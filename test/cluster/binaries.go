package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Versions of the binaries the harness runs. hack/cluster-binaries.sh
// builds them into the cache with these same versions (a unit test checks
// the two agree).
const (
	K8sVersion            = "v1.37.1"
	CSIProvisionerVersion = "v6.4.0"
	EtcdVersion           = "v3.6.16"
)

// Binaries are the absolute paths of every program a cluster runs.
type Binaries struct {
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubelet               string
	Kubectl               string
	// KubeProxy is needed only with Options.PodNetwork (Options.Validate
	// checks it then).
	KubeProxy string
	// CSIProvisioner is needed only by StartHPPCSI/StartCSIProvisioner.
	CSIProvisioner string
	// CSIResizer is needed only by StartHPPCSI on the real node.
	CSIResizer string
	// From Debian's packages (containerd, runc, containernetworking-plugins).
	Containerd string
	Ctr        string
	Runc       string
	CNIBinDir  string
	// Pause, when set, is a prebuilt test/images/pause (static); empty
	// builds it with the Go toolchain at Start. Set it where there is no
	// toolchain (the quota VM, hack/quotavm.sh).
	Pause string
}

// BinariesFromCache returns the paths of the binaries that
// `make cluster-binaries` builds into cacheDir (HPP_CACHE, by default
// ~/.cache/hpp), and of Debian's containerd, ctr and runc from PATH. Check
// the result with Validate.
func BinariesFromCache(cacheDir string) Binaries {
	k8s := filepath.Join(cacheDir, "k8s", K8sVersion)
	look := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		return filepath.Join("/usr/bin", name)
	}
	return Binaries{
		Etcd:                  filepath.Join(cacheDir, "etcd", EtcdVersion, "etcd"),
		KubeAPIServer:         filepath.Join(k8s, "kube-apiserver"),
		KubeControllerManager: filepath.Join(k8s, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(k8s, "kube-scheduler"),
		Kubelet:               filepath.Join(k8s, "kubelet"),
		Kubectl:               filepath.Join(k8s, "kubectl"),
		KubeProxy:             filepath.Join(k8s, "kube-proxy"),
		CSIProvisioner:        filepath.Join(cacheDir, "csi-provisioner", CSIProvisionerVersion, "csi-provisioner"),
		CSIResizer:            filepath.Join(cacheDir, "csi-resizer", CSIResizerVersion, "csi-resizer"),
		Containerd:            look("containerd"),
		Ctr:                   look("ctr"),
		Runc:                  look("runc"),
		CNIBinDir:             "/usr/lib/cni",
	}
}

// CacheDir is where the cluster binaries are cached: $HPP_CACHE, as the
// Makefile passes it, else DefaultCacheDir.
func CacheDir() (string, error) {
	if dir := os.Getenv("HPP_CACHE"); dir != "" {
		return dir, nil
	}
	return DefaultCacheDir()
}

// DefaultCacheDir is where the Makefile caches cluster binaries when
// HPP_CACHE is not set.
func DefaultCacheDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "hpp"), nil
}

// checkExecutable reports why path (binaries.<field>) is not an executable
// file, with fix, the command that installs it; nil when it is one.
func checkExecutable(field, path, fix string) error {
	if path == "" {
		return fmt.Errorf("binaries.%s: empty path", field)
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("binaries.%s %q: must be absolute", field, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("binaries.%s %s: missing (%s)", field, path, fix)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("binaries.%s %s: not an executable file", field, path)
	}
	return nil
}

// Commands that install the binaries, named in checkExecutable's errors.
const (
	fixBuild = "run `make cluster-binaries`"
	fixDeps  = "run `make deps`"
)

// Validate reports every missing binary at once, with what installs it.
func (b Binaries) Validate() error {
	var errs []error
	check := func(field, path, fix string) {
		if err := checkExecutable(field, path, fix); err != nil {
			errs = append(errs, err)
		}
	}
	check("Etcd", b.Etcd, fixBuild)
	check("KubeAPIServer", b.KubeAPIServer, fixBuild)
	check("KubeControllerManager", b.KubeControllerManager, fixBuild)
	check("KubeScheduler", b.KubeScheduler, fixBuild)
	check("Kubelet", b.Kubelet, fixBuild)
	// csi-provisioner only when a node runs a CSI driver: StartCSIProvisioner checks it.
	check("Containerd", b.Containerd, fixDeps)
	check("Ctr", b.Ctr, fixDeps)
	check("Runc", b.Runc, fixDeps)
	if b.Pause != "" {
		check("Pause", b.Pause, "build test/images/pause with CGO_ENABLED=0")
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		check("CNIBinDir/"+plugin, filepath.Join(b.CNIBinDir, plugin), fixDeps)
	}
	return errors.Join(errs...)
}
