package driver

import (
	"context"

	"go.uber.org/zap"
)

// BindingModes looks up how a claim's StorageClass binds. It needs the
// Kubernetes API, which the driver otherwise never talks to, so it is
// optional (--check-binding-mode).
type BindingModes interface {
	// ImmediateClass returns the claim's StorageClass and whether it uses
	// volumeBindingMode Immediate.
	ImmediateClass(ctx context.Context, namespace, claim string) (class string, immediate bool, err error)
}

// Set by csi-provisioner's --extra-create-metadata.
const (
	paramPVCName      = "csi.storage.k8s.io/pvc/name"
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
)

// refuseImmediate refuses claims of an Immediate StorageClass. In
// node-deployment mode csi-provisioner takes such a claim by naming its own
// node, so the request looks like a WaitForFirstConsumer one and only the
// StorageClass tells them apart. Without the lookup (flag off, no claim
// metadata, API unreachable) the request is served: refusing every volume
// because the API server blinked would be worse than the rare Immediate
// claim landing on the node that took it.
func (d *Driver) refuseImmediate(ctx context.Context, params map[string]string) error {
	if d.deps.Binding == nil {
		return nil
	}
	ns, name := params[paramPVCNamespace], params[paramPVCName]
	if ns == "" || name == "" {
		return nil
	}
	class, immediate, err := d.deps.Binding.ImmediateClass(ctx, ns, name)
	if err != nil {
		d.log.Warn("cannot check the claim's binding mode; serving the request", zap.String("claim", ns+"/"+name), zap.Error(err))
		return nil
	}
	if immediate {
		return invalidArg("StorageClass %q of claim %s/%s uses volumeBindingMode Immediate; hostpath volumes need "+
			"volumeBindingMode: WaitForFirstConsumer so the volume is created on the node the scheduler picks for the pod "+
			"(create a StorageClass with WaitForFirstConsumer and recreate the claim)", class, ns, name)
	}
	return nil
}
