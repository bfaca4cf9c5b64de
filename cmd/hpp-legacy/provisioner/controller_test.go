package provisioner

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
)

// waitLimit only bounds a hung test; nothing here asserts speed.
const waitLimit = 2 * time.Minute

// node is one simulated node: its own PV_DIR and its own library
// controller, sharing the fake API server with the other nodes.
type node struct {
	name, dir string
	labeler   *fakeLabeler
}

func startNode(ctx context.Context, t *testing.T, client *fake.Clientset, name string) *node {
	t.Helper()
	n := &node{name: name, dir: filepath.Join(t.TempDir(), name), labeler: &fakeLabeler{}}
	store, err := dirvol.Open(n.dir, dirvol.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	classes := factory.Storage().V1().StorageClasses()
	nodes := factory.Core().V1().Nodes()
	p, err := New(Config{
		NodeName: name, PVDir: n.dir, Client: client,
		Nodes: nodes.Lister(), Classes: classes.Lister(), Volumes: store, Labeler: n.labeler,
		Statfs: func(string) (capacity.Stats, error) {
			return capacity.Stats{TotalBytes: 100 * gi, AvailableBytes: 100 * gi}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Verbosity 2: the library logs every object at 4 and 5.
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	lctx := klog.NewContext(ctx, logger)
	ctrl := controller.NewProvisionController(logger, client, contract.LegacyProvisionerName, p,
		controller.LeaderElection(false),
		controller.ClaimsInformer(claims), controller.VolumesInformer(volumes), controller.ClassesInformer(classes.Informer()),
		// One worker per queue keeps each queue in order, which the Retain
		// check below relies on.
		controller.Threadiness(1),
	)
	nodes.Informer() // register before Start
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	runCtx, cancel := context.WithCancel(lctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
		if err := p.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return n
}

func (n *node) volumes(t *testing.T) []string {
	t.Helper()
	des, err := os.ReadDir(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if de.Name()[0] != '.' {
			names = append(names, de.Name())
		}
	}
	return names
}

func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitLimit, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestLibraryController runs the real library controller of two simulated
// nodes against one fake API server: the scheduler-selected node alone
// provisions and deletes, Retain keeps the directory, and an unplaceable
// claim gets one event.
func TestLibraryController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	retain := v1.PersistentVolumeReclaimRetain
	retainClass := class("wffc-retain", storagev1.VolumeBindingWaitForFirstConsumer)
	retainClass.ReclaimPolicy = &retain
	client := fake.NewClientset(
		class("wffc", storagev1.VolumeBindingWaitForFirstConsumer), retainClass,
		class("immediate", storagev1.VolumeBindingImmediate),
		nodeObj(testNode, testHostname), nodeObj("node-b", "node-b"),
	)
	a := startNode(ctx, t, client, testNode)
	b := startNode(ctx, t, client, "node-b")

	// What the PV controller adds once the scheduler picked node-a.
	handed := func(name, className string) *v1.PersistentVolumeClaim {
		c := claim(name, className, map[string]string{
			contract.AnnSelectedNode: testNode, "volume.kubernetes.io/storage-provisioner": contract.LegacyProvisionerName,
		})
		if _, err := client.CoreV1().PersistentVolumeClaims("ns1").Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	getPV := func(name string) (*v1.PersistentVolume, error) {
		return client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	}
	provisioned := func(name string) *v1.PersistentVolume {
		var pv *v1.PersistentVolume
		waitFor(ctx, t, "PV "+name, func() (bool, error) {
			var err error
			pv, err = getPV(name)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
		return pv
	}

	keep := handed("keep", "wffc-retain")
	gone := handed("gone", "wffc")
	pvKeep, pvGone := provisioned("pvc-uid-keep"), provisioned("pvc-uid-gone")
	for _, pv := range []*v1.PersistentVolume{pvKeep, pvGone} {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != keep.UID && pv.Spec.ClaimRef.UID != gone.UID ||
			pv.Annotations[contract.AnnProvisionedBy] != contract.LegacyProvisionerName || pv.Annotations[contract.AnnProvisionOnNode] != testNode ||
			pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != testHostname {
			t.Errorf("PV %s: claimRef %+v, annotations %v, affinity %+v", pv.Name, pv.Spec.ClaimRef, pv.Annotations, pv.Spec.NodeAffinity)
		}
	}
	if pvKeep.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimRetain || pvKeep.Spec.StorageClassName != "wffc-retain" {
		t.Errorf("PV keep: reclaim %s, class %s", pvKeep.Spec.PersistentVolumeReclaimPolicy, pvKeep.Spec.StorageClassName)
	}
	if got := a.volumes(t); !reflect.DeepEqual(got, []string{"pvc-uid-gone", "pvc-uid-keep"}) {
		t.Errorf("node-a PV_DIR holds %q", got)
	}
	if got := b.volumes(t); got != nil {
		t.Errorf("node-b PV_DIR holds %q; it never owned a claim", got)
	}

	// The claims are deleted; the PV controller marks both PVs Released,
	// the Retain one first.
	for _, pv := range []*v1.PersistentVolume{pvKeep, pvGone} {
		pv.Status.Phase = v1.VolumeReleased
		if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(ctx, t, "PV pvc-uid-gone deleted", func() (bool, error) {
		_, err := getPV("pvc-uid-gone")
		return apierrors.IsNotFound(err), nil
	})
	if got := a.volumes(t); !reflect.DeepEqual(got, []string{"pvc-uid-keep"}) {
		t.Errorf("node-a PV_DIR holds %q; want only the Retain volume", got)
	}
	if _, err := getPV("pvc-uid-keep"); err != nil {
		t.Errorf("Retain PV: %v", err)
	}

	// Immediate without provisionOnNode: nobody provisions, one event.
	c := claim("lost", "immediate", map[string]string{"volume.kubernetes.io/storage-provisioner": contract.LegacyProvisionerName})
	if _, err := client.CoreV1().PersistentVolumeClaims("ns1").Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Both nodes try to create the event; the second create fails.
	waitFor(ctx, t, "both nodes to report claim lost", func() (bool, error) {
		creates := 0
		for _, a := range client.Actions() {
			if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
				if ev, ok := ca.GetObject().(*v1.Event); ok && ev.InvolvedObject.Name == "lost" {
					creates++
				}
			}
		}
		return creates >= 2, nil
	})
	list, err := client.CoreV1().Events("ns1").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var events []v1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == "lost" {
			events = append(events, ev)
		}
	}
	if len(events) != 1 || events[0].Reason != ReasonNoNode {
		t.Errorf("events for claim lost: %+v", events)
	}
	if got := b.volumes(t); got != nil {
		t.Errorf("node-b PV_DIR holds %q", got)
	}
}
