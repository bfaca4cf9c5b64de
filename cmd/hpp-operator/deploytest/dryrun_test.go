package deploytest

import (
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/internal/testenv"
)

// TestOverlaysApplyWithServerSideDryRun applies every rendered object of
// every overlay to the harness's real kube-apiserver (v1.37) with
// server-side apply and dryRun=All, so every field is validated by
// Kubernetes itself. Namespaces are created for real first (a dry-run
// namespace does not hold dry-run objects).
func TestOverlaysApplyWithServerSideDryRun(t *testing.T) {
	_, cfg := testenv.Start(t, envtest.WebhookInstallOptions{})
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	crds := append([]*apiextensionsv1.CustomResourceDefinition{
		testenv.StubCRD("cert-manager.io", "Issuer", "issuers"),
		testenv.StubCRD("cert-manager.io", "Certificate", "certificates"),
		testenv.StubClusterCRD("snapshot.storage.k8s.io", "VolumeSnapshotClass", "volumesnapshotclasses"),
	}, testenv.PrometheusOperatorCRDs()...)
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
		t.Fatalf("wait for stub CRDs: %v", err)
	}
	// OpenShift's real CRDs: the openshift component's SCC is checked
	// against their schema.
	openShiftCRDs, err := testenv.OpenShiftCRDPaths()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: openShiftCRDs, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install OpenShift's CRDs: %v", err)
	}
	t.Run("examples", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(deployDir(), "examples", "*.yaml"))
		if len(files) == 0 {
			t.Fatal("no examples")
		}
		for _, f := range files {
			for _, u := range testenv.ReadManifests(t, f) {
				if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
					client.FieldOwner("deploytest"), client.ForceOwnership, client.DryRunAll); err != nil {
					t.Errorf("%s: server-side dry-run of %s: %v", filepath.Base(f), id(u), err)
				}
			}
		}
		t.Logf("%d example files accepted by kube-apiserver (CRD schema and CEL rules included)", len(files))
	})
	for _, name := range overlays(t) {
		t.Run(name, func(t *testing.T) { dryRun(t, c, name, buildOverlay(t, name)) })
	}
	// And each csi-only overlay with the cross-node-clones component, as
	// a user's overlay over it renders it.
	for _, name := range csiOnlyOverlays(t) {
		t.Run(name+"+"+crossNodeComponent, func(t *testing.T) { dryRun(t, c, name+"+"+crossNodeComponent, buildCrossNode(t, name)) })
	}
}

// dryRun creates the namespaces of objs for real and applies the rest with
// server-side apply and dryRun=All.
func dryRun(t *testing.T, c client.Client, name string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	// The overlays leave the Namespace out (deploy/base/namespace
	// is applied on its own, so `kubectl delete -k` never takes it).
	nsObjs := testenv.ReadManifests(t, filepath.Join(deployDir(), "base", "namespace", "namespace.yaml"))
	for _, u := range objs {
		if ns := u.GetNamespace(); ns != "" && !slices.ContainsFunc(nsObjs, func(n *unstructured.Unstructured) bool { return n.GetName() == ns }) {
			n := &unstructured.Unstructured{}
			n.SetAPIVersion("v1")
			n.SetKind("Namespace")
			n.SetName(ns)
			nsObjs = append(nsObjs, n)
		}
	}
	for _, u := range append(nsObjs, objs...) {
		if u.GetKind() == "Namespace" {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("deploytest"), client.ForceOwnership); err != nil {
				t.Fatalf("create %s: %v", id(u), err)
			}
		}
	}
	n := 0
	for _, u := range objs {
		if u.GetKind() == "Namespace" {
			continue
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner("deploytest"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("server-side dry-run of %s: %v", id(u), err)
			continue
		}
		n++
	}
	t.Logf("%s: %d objects accepted by kube-apiserver (server-side apply, dry-run)", name, n)
}
