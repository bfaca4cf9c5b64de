package hostpathprovisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/controller/adopt"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-operator/render"
	"github.com/hostpath-provisioner/hpp/internal/manifests"
)

// hashAnnotation holds a digest of what was last applied, so a reconcile
// that has nothing to change can tell without writing.
const hashAnnotation = "hostpathprovisioner.kubevirt.io/applied-hash"

// applier applies desired objects with server-side apply, but only when the
// live object (read from the cache, so free) differs: its applied-hash is
// not the desired one (something we set changed or was removed), or a value
// we set was changed by someone else. A reconcile with nothing to do
// therefore sends no write at all.
type applier struct {
	reader client.Reader
	// live reads from the API server what the cache does not hold (an
	// object another installation made); nil: the cache only.
	live   client.Reader
	writer client.Client
	scheme *runtime.Scheme
	// kept is told, before a write, which immutable fields of the live
	// object were kept instead of the desired values (adopt.Object).
	kept func(obj *unstructured.Unstructured, fields []string)
}

// apply returns whether it wrote.
func (a *applier) apply(ctx context.Context, obj client.Object) (bool, error) {
	desired, err := toUnstructured(a.scheme, obj)
	if err != nil {
		return false, err
	}
	live, err := a.get(ctx, desired)
	if err != nil {
		return false, err
	}
	var liveFields map[string]any
	var kept []string
	if live != nil {
		if liveFields, kept, err = adopt.Object(ctx, a.writer, a.scheme, desired, live); err != nil {
			return false, err
		}
	}
	if err := adopt.SetLastApplied(desired); err != nil {
		return false, err
	}
	sum, err := digest(desired)
	if err != nil {
		return false, err
	}
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[hashAnnotation] = sum
	desired.SetAnnotations(ann)

	if live != nil && live.GetAnnotations()[hashAnnotation] == sum && manifests.Holds(liveFields, desired.Object) {
		return false, nil
	}
	if len(kept) > 0 && a.kept != nil {
		a.kept(desired, kept)
	}
	if err := a.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired),
		client.FieldOwner(adopt.FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("apply %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	return true, nil
}

// get reads the live object of desired from the cache or, when the cache
// does not have it, from the API server; nil when it does not exist.
func (a *applier) get(ctx context.Context, desired *unstructured.Unstructured) (client.Object, error) {
	fresh, err := a.scheme.New(desired.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	live, ok := fresh.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object", desired.GroupVersionKind())
	}
	key := client.ObjectKeyFromObject(desired)
	err = a.reader.Get(ctx, key, live)
	if apierrors.IsNotFound(err) && a.live != nil {
		// The cache holds cluster-scoped objects only with hpp's label, so
		// one of the same name left by another installation is seen only
		// by asking the API server. This read happens only before a
		// create: once applied, the object carries the label.
		err = a.live.Get(ctx, key, live)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	return live, nil
}

// toUnstructured turns a typed object into what is applied: its JSON
// without status and without the zero creationTimestamp typed objects carry.
func toUnstructured(s *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		gvk = gvks[0]
	}
	m, err := render.Clean(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func digest(u *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(u.Object) // map keys are sorted: stable
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8]), nil
}
