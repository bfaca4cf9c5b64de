package takeover

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hostpath-provisioner/hpp/internal/manifests"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Inventory is what the takeover reads: the install namespace's objects
// and the cluster-wide ones of the kinds it touches, and hpp's manifests.
type Inventory struct {
	Namespace string
	// Live objects by kind, each list in the API server's order.
	Live map[string][]*unstructured.Unstructured
	// Manifests are hpp's operator install (kubectl kustomize
	// deploy/overlays/operator), in file order.
	Manifests []*unstructured.Unstructured
	// Served is false for an optional kind the API server does not serve.
	Served map[string]bool
}

// Collect lists every kind of Resources (namespaced ones in ns).
func Collect(ctx context.Context, c dynamic.Interface, ns string, manifests []*unstructured.Unstructured) (*Inventory, error) {
	inv := &Inventory{Namespace: ns, Live: map[string][]*unstructured.Unstructured{}, Served: map[string]bool{}, Manifests: manifests}
	for _, r := range Resources {
		var ri dynamic.ResourceInterface = c.Resource(r.GVR)
		if r.Namespaced {
			ri = c.Resource(r.GVR).Namespace(ns)
		}
		l, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			if r.Optional && (apierrors.IsNotFound(err) || isNoMatch(err)) {
				continue
			}
			return nil, fmt.Errorf("list %s: %w", r.GVR.Resource, err)
		}
		inv.Served[r.Kind] = true
		for i := range l.Items {
			o := &l.Items[i]
			o.SetKind(r.Kind) // lists leave items' kind to the list
			o.SetAPIVersion(r.GVR.GroupVersion().String())
			inv.Live[r.Kind] = append(inv.Live[r.Kind], o)
		}
	}
	return inv, nil
}

func isNoMatch(err error) bool {
	var se *apierrors.StatusError
	return errors.As(err, &se) && se.ErrStatus.Code == 404
}

// Get is the live object of that kind, namespace and name, or nil.
func (inv *Inventory) Get(kind, ns, name string) *unstructured.Unstructured {
	for _, o := range inv.Live[kind] {
		if o.GetName() == name && o.GetNamespace() == ns {
			return o
		}
	}
	return nil
}

// Manifest is hpp's manifest object of that kind and name, or nil.
func (inv *Inventory) Manifest(kind, name string) *unstructured.Unstructured {
	for _, o := range inv.Manifests {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ReadManifests decodes a multi-document YAML (or JSON) stream; every
// object must be of a kind the takeover knows.
func ReadManifests(r io.Reader) ([]*unstructured.Unstructured, error) {
	out, err := manifests.Decode(r)
	if err != nil {
		return nil, err
	}
	for i, o := range out {
		if _, err := ResourceOf(o.GetAPIVersion(), o.GetKind()); err != nil {
			return nil, fmt.Errorf("manifest object %d (%s): %w", i, o.GetName(), err)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no objects in the manifests (pipe in `kubectl kustomize deploy/overlays/operator`)")
	}
	return out, nil
}
