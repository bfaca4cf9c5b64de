package deploytest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

// TestMounterAcceptsTheOperatorsArguments runs the real hpp-mounter with
// the argument lists the operator renders for a mounter Deployment and a
// cleanup Job (cmd/hpp-mounter/README.md is the contract), plus --help: a
// flag hpp-mounter does not know fails the parse, so a renamed flag on
// either side breaks this test, not a cluster.
func TestMounterAcceptsTheOperatorsArguments(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hpp-mounter")
	build := testenv.GoCommand(t.Context(), filepath.Join(testenvRoot(), "cmd", "hpp-mounter"), "build", "-o", bin, ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hpp-mounter: %v\n%s", err, b)
	}
	cfg := render.DefaultConfig()
	spec := &hppv1.HostPathProvisionerSpec{}
	pools := []hppv1.StoragePool{
		{Name: "fs", Path: "/var/fs", PVCTemplate: &corev1.PersistentVolumeClaimSpec{}},
		{Name: "blk", Path: "/var/blk", PVCTemplate: &corev1.PersistentVolumeClaimSpec{VolumeMode: ptr.To(corev1.PersistentVolumeBlock)}},
	}
	lists := map[string][]string{
		"cleanup Job": cfg.CleanupJob(spec, "fs", "/var/fs", "node-1").Spec.Template.Spec.Containers[0].Args,
	}
	for i := range pools {
		lists["mounter of "+pools[i].Name] = cfg.MounterDeployment(spec, &pools[i], "node-1").Spec.Template.Spec.Containers[0].Args
	}
	for what, args := range lists {
		if b, err := exec.CommandContext(t.Context(), bin, append(args, "--help")...).CombinedOutput(); err != nil {
			t.Errorf("%s: hpp-mounter %s: %v\n%s", what, strings.Join(args, " "), err, b)
		}
	}
	if err := exec.CommandContext(t.Context(), bin, "--no-such-flag", "--help").Run(); err == nil {
		t.Error("hpp-mounter accepts an unknown flag with --help: this test would prove nothing")
	}
}
