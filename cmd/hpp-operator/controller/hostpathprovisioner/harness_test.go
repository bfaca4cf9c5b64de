package hostpathprovisioner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	secv1 "github.com/openshift/api/security/v1"
	promv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/hostpathprovisioner"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
)

type harness struct {
	t      *testing.T
	ctx    context.Context
	admin  client.Client // the test's own, uncounted, uncached client
	mgr    ctrl.Manager
	rec    *hostpathprovisioner.Reconciler
	cfg    render.Config
	scheme *runtime.Scheme
}

func newScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := hppv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := promv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := secv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil { // the tests install CRDs
		t.Fatal(err)
	}
	return s
}

// start runs the operator's manager (real cache, real watches) against the
// envtest API server, in namespace ns.
func start(t *testing.T, ns string) *harness {
	t.Helper()
	return startWith(t, ns, options{})
}

type options struct {
	// operatorCfg is the manager's rest config (nil: admin).
	operatorCfg *rest.Config
	// setup runs with the admin client after the namespace exists and
	// before the manager starts.
	setup func(client.Client)
	// config adjusts the operator's render configuration.
	config func(*render.Config)
}

func startWith(t *testing.T, ns string, o options) *harness {
	t.Helper()
	needEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	scheme := newScheme(t)
	admin, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if o.setup != nil {
		o.setup(admin)
	}
	operatorCfg := o.operatorCfg
	if operatorCfg == nil {
		operatorCfg = restCfg
	}
	cfg := render.DefaultConfig()
	cfg.Namespace = ns
	cfg.Version = "v9.9.9-test"
	cfg.Images.CSI = "localhost/hpp-csi:test"
	cfg.Images.Legacy = "localhost/hpp-legacy:test"
	if o.config != nil {
		o.config(&cfg)
	}
	mgr, err := ctrl.NewManager(operatorCfg, ctrl.Options{
		Scheme:     scheme,
		Cache:      hostpathprovisioner.CacheOptions(cfg),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &hostpathprovisioner.Reconciler{Client: mgr.GetClient(), Scheme: scheme, Config: cfg,
		Recorder: mgr.GetEventRecorder("hpp-operator"), Log: testr.New(t)}
	if err := rec.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	h := &harness{t: t, ctx: ctx, admin: admin, mgr: mgr, rec: rec, cfg: cfg, scheme: scheme}
	t.Cleanup(func() {
		h.deleteAllCRs()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return h
}

// deleteAllCRs deletes every CR and waits until the operator's finalizer
// let them go, so the next test starts from a clean cluster.
func (h *harness) deleteAllCRs() {
	list := &hppv1.HostPathProvisionerList{}
	if err := h.admin.List(h.ctx, list); err != nil {
		h.t.Errorf("list CRs: %v", err)
		return
	}
	for i := range list.Items {
		_ = h.admin.Delete(h.ctx, &list.Items[i])
	}
	eventually(h.t, "every HostPathProvisioner deleted", func() error {
		if err := h.admin.List(h.ctx, list); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return errString("still there: " + list.Items[0].Name)
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func poolsCR(name string, pools ...hppv1.StoragePool) *hppv1.HostPathProvisioner {
	return &hppv1.HostPathProvisioner{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       hppv1.HostPathProvisionerSpec{ImagePullPolicy: corev1.PullNever, StoragePools: pools},
	}
}

// create makes obj with the admin client; a test cannot go on without it.
func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := h.admin.Create(h.ctx, obj); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(key client.ObjectKey, obj client.Object) error {
	return h.admin.Get(h.ctx, key, obj)
}

func (h *harness) cond(name string, t hppv1.ConditionType) (*hppv1.Condition, error) {
	cr := &hppv1.HostPathProvisioner{}
	if err := h.get(client.ObjectKey{Name: name}, cr); err != nil {
		return nil, err
	}
	c := cr.Status.FindCondition(t)
	if c == nil {
		return nil, errString("no condition " + string(t))
	}
	return c, nil
}

func argValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
		if a == flag {
			return "", true
		}
	}
	return "", false
}

// needUnserved skips without envtest, and fails when the API that served
// probes for is already there: such a test starts from its absence.
func needUnserved(t *testing.T, what string, served func(*rest.Config) (bool, error)) {
	t.Helper()
	needEnv(t)
	if got, err := served(restCfg); err != nil || got {
		t.Fatalf("%s: served %v, %v; want false, nil", what, got, err)
	}
}

// waitServed waits until served reports want: the API server takes up and
// drops CRDs asynchronously.
func waitServed(t *testing.T, what string, served func(*rest.Config) (bool, error), want bool) {
	t.Helper()
	eventually(t, what, func() error {
		got, err := served(restCfg)
		if err == nil && got != want {
			err = fmt.Errorf("served %v, want %v", got, want)
		}
		return err
	})
}
