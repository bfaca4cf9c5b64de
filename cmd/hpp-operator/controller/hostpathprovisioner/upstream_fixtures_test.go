package hostpathprovisioner_test

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
)

// upstreamNamespace is the namespace written in the fixtures (upstream's
// documented one); the loader moves the objects into the test's.
const upstreamNamespace = "hostpath-provisioner"

// upstreamInstall is what loadUpstream wrote, each object as the API server
// returned it: the CR first, then the rest in file order.
type upstreamInstall struct {
	cr      *unstructured.Unstructured
	objects []*unstructured.Unstructured
}

// find returns the loaded object of that kind and name, or fails the test.
func (u *upstreamInstall) find(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range u.objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("fixture has no %s %s", kind, name)
	return nil
}

// loadUpstream writes testdata/upstream/<scenario> into the API server as
// the upstream operator (and the user, and the provisioners) would have:
// with their field managers, so that managedFields look like a real
// upstream install (testdata/upstream/README.md has the conventions).
// Cluster-scoped objects are shared by the package's tests: one left by an
// earlier test is replaced, and the test removes them at the end.
func loadUpstream(t *testing.T, admin client.Client, scenario, ns string) *upstreamInstall {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join("testdata", "upstream", scenario)
	crs := testenv.ReadManifests(t, filepath.Join(dir, "hostpathprovisioner.yaml"))
	if len(crs) != 1 {
		t.Fatalf("%s/hostpathprovisioner.yaml: want one CR, got %d", dir, len(crs))
	}
	up := &upstreamInstall{cr: crs[0]}
	writeFixture(t, admin, up.cr, adopt.UpstreamFieldManager)
	t.Cleanup(func() { _ = admin.Delete(ctx, up.cr) }) // normally gone already (the harness deletes CRs)

	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		base := filepath.Base(f)
		if base == "hostpathprovisioner.yaml" {
			continue
		}
		for _, o := range testenv.ReadManifests(t, f) {
			relocate(o, ns, string(up.cr.GetUID()))
			writeFixture(t, admin, o, fixtureManager(base))
			up.objects = append(up.objects, o)
			if o.GetNamespace() == "" {
				t.Cleanup(func() { removeClusterFixture(admin, o) })
			}
		}
	}
	return up
}

// fixtureManager is the field manager that wrote a fixture file's objects.
func fixtureManager(file string) string {
	switch {
	case strings.HasPrefix(file, "user-"):
		return "kubectl-create"
	case strings.HasPrefix(file, "provisioned-csi-"):
		return "csi-provisioner"
	case strings.HasPrefix(file, "provisioned-legacy-"):
		return "hostpath-provisioner"
	}
	return adopt.UpstreamFieldManager
}

// relocate moves a fixture into the test's namespace and points its owner
// references at the CR the API server just created.
func relocate(o *unstructured.Unstructured, ns, crUID string) {
	if o.GetNamespace() == upstreamNamespace {
		o.SetNamespace(ns)
	}
	if subjects, ok := o.Object["subjects"].([]any); ok {
		for _, s := range subjects {
			if m, ok := s.(map[string]any); ok && m["namespace"] == upstreamNamespace {
				m["namespace"] = ns
			}
		}
	}
	// An SCC names its ServiceAccounts as users.
	if users, ok := o.Object["users"].([]any); ok {
		from := "system:serviceaccount:" + upstreamNamespace + ":"
		for i, u := range users {
			if s, ok := u.(string); ok && strings.HasPrefix(s, from) {
				users[i] = "system:serviceaccount:" + ns + ":" + strings.TrimPrefix(s, from)
			}
		}
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		if refs[i].Kind == "HostPathProvisioner" {
			refs[i].UID = types.UID(crUID)
		}
	}
	o.SetOwnerReferences(refs)
}

// writeFixture creates o with the given field manager and then writes its
// status, as the object's controller would have. A cluster-scoped object
// of the same name (an earlier test's) is replaced first.
func writeFixture(t *testing.T, admin client.Client, o *unstructured.Unstructured, manager string) {
	t.Helper()
	ctx := context.Background()
	status, hasStatus := o.Object["status"]
	err := admin.Create(ctx, o.DeepCopy(), client.FieldOwner(manager))
	if apierrors.IsAlreadyExists(err) && o.GetNamespace() == "" {
		removeClusterFixture(admin, o)
		err = admin.Create(ctx, o.DeepCopy(), client.FieldOwner(manager))
	}
	if err != nil {
		t.Fatalf("write fixture %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		t.Fatal(err)
	}
	if hasStatus {
		o.Object["status"] = status
		if err := admin.Status().Update(ctx, o, client.FieldOwner(manager)); err != nil {
			t.Fatalf("write the status of fixture %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// removeClusterFixture deletes a cluster-scoped object, finalizers (a PV's
// external-provisioner one) included: nothing in envtest would remove them.
func removeClusterFixture(admin client.Client, o *unstructured.Unstructured) {
	ctx := context.Background()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := admin.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		return
	}
	if len(live.GetFinalizers()) > 0 {
		live.SetFinalizers(nil)
		_ = admin.Update(ctx, live)
	}
	_ = admin.Delete(ctx, live)
}
