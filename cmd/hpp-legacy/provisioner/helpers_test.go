package provisioner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

const (
	gi       = int64(1) << 30
	testNode = "node-a"
	// The hostname label deliberately differs from the node name: the PV
	// must be pinned by the label's value.
	testHostname = "host-a.example"
)

type fakeNodes map[string]*v1.Node

func (f fakeNodes) Get(name string) (*v1.Node, error) {
	if n, ok := f[name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

type fakeClasses map[string]*storagev1.StorageClass

func (f fakeClasses) Get(name string) (*storagev1.StorageClass, error) {
	if c, ok := f[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, name)
}

type fakeLabeler struct {
	mu    sync.Mutex
	paths []string
	err   error
}

func (f *fakeLabeler) Enabled() bool { return true }
func (f *fakeLabeler) Relabel(_ context.Context, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, path)
	return f.err
}

// env is one node's provisioner over a real dirvol store in a temp dir.
type env struct {
	t       *testing.T
	dir     string
	client  *fake.Clientset
	classes fakeClasses
	labeler *fakeLabeler
	stats   capacity.Stats
	p       *Provisioner
}

type envOption func(*Config)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	e := &env{
		t:       t,
		dir:     filepath.Join(t.TempDir(), "pvs"),
		client:  fake.NewClientset(),
		classes: fakeClasses{"wffc": class("wffc", storagev1.VolumeBindingWaitForFirstConsumer), "immediate": class("immediate", storagev1.VolumeBindingImmediate)},
		labeler: &fakeLabeler{},
		stats:   capacity.Stats{TotalBytes: 100 * gi, AvailableBytes: 50 * gi},
	}
	e.newProvisioner(testNode, opts...)
	return e
}

// newProvisioner (re)makes e.p for node, sharing the client, disk and classes.
func (e *env) newProvisioner(node string, opts ...envOption) *Provisioner {
	e.t.Helper()
	store, err := dirvol.Open(e.dir, dirvol.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := Config{
		NodeName: node, PVDir: e.dir,
		Client:  e.client,
		Nodes:   fakeNodes{testNode: nodeObj(testNode, testHostname), "node-b": nodeObj("node-b", "node-b")},
		Classes: e.classes, Volumes: store, Labeler: e.labeler,
		Statfs: func(path string) (capacity.Stats, error) {
			if path != e.dir {
				return capacity.Stats{}, errors.New("statfs of unexpected path " + path)
			}
			return e.stats, nil
		},
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
	return p
}

// entries lists PV_DIR without hpp's private areas.
func (e *env) entries() []string {
	e.t.Helper()
	des, err := os.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.Name()[0] != '.' {
			names = append(names, de.Name())
		}
	}
	sort.Strings(names)
	return names
}

// events lists all events in the fake cluster as "type reason: message".
func (e *env) events() []string {
	e.t.Helper()
	list, err := e.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name+" "+ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	sort.Strings(out)
	return out
}

func class(name string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       contract.LegacyProvisionerName,
		VolumeBindingMode: &mode,
	}
}

func nodeObj(name, hostname string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: hostname}}}
}

func claim(name, className string, annotations map[string]string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns1", UID: types.UID("uid-" + name), ResourceVersion: "7",
			Annotations: annotations,
		},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
}

func selected(node string) map[string]string {
	return map[string]string{contract.AnnSelectedNode: node}
}
func onNode(node string) map[string]string {
	return map[string]string{contract.AnnProvisionOnNode: node}
}
