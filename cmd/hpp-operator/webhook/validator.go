// Package webhook is the HostPathProvisioner validating webhook: the rules
// of hppv1.ValidateSpec/ValidateUpdate plus the ones that need the cluster
// (one CR per cluster; no change that orphans existing volumes), and the
// TLS and certificate plumbing that serves it.
package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	hppv1 "github.com/hostpath-provisioner/hpp/internal/api/v1beta1"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Path is where the webhook is served (controller-runtime's path for the type).
const Path = "/validate-hostpathprovisioner-kubevirt-io-v1beta1-hostpathprovisioner"

// Validator validates HostPathProvisioner creates and updates. It never
// sees DELETE: the webhook configuration does not register it, so a CR can
// always be deleted, operator or not.
type Validator struct {
	// Reader lists HostPathProvisioners and PersistentVolumes (the
	// operator's cache).
	Reader client.Reader
}

var _ admission.Validator[*hppv1.HostPathProvisioner] = (*Validator)(nil)

// ValidateCreate refuses an invalid spec and a second CR.
func (v *Validator) ValidateCreate(ctx context.Context, cr *hppv1.HostPathProvisioner) (admission.Warnings, error) {
	errs := hppv1.ValidateSpec(&cr.Spec)
	list := &hppv1.HostPathProvisionerList{}
	if err := v.Reader.List(ctx, list); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("list HostPathProvisioners: %w", err))
	}
	for _, other := range list.Items {
		if other.Name != cr.Name {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), fmt.Sprintf(
				"HostPathProvisioner %q already exists and hpp runs from exactly one; edit that one instead", other.Name)))
			break
		}
	}
	return nil, invalid(cr, errs)
}

// ValidateUpdate refuses an invalid spec and changes that would orphan the
// data of existing volumes. An update that leaves the spec alone (metadata,
// finalizers) always passes, so a CR made before the webhook existed can
// still be cleaned up.
func (v *Validator) ValidateUpdate(ctx context.Context, old, cr *hppv1.HostPathProvisioner) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, cr.Spec) {
		return nil, nil
	}
	use, err := usage(ctx, v.Reader)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var warnings admission.Warnings
	if old.Spec.PathConfig != nil && cr.Spec.PathConfig == nil && use.LegacyVolumes > 0 {
		warnings = append(warnings, fmt.Sprintf(
			"%d legacy hostPath PersistentVolume(s) keep working but are no longer deleted by a provisioner; move them onto the CSI driver with hpp-migrate",
			use.LegacyVolumes))
	}
	return warnings, invalid(cr, hppv1.ValidateUpdate(&old.Spec, &cr.Spec, use))
}

// ValidateDelete is never called (DELETE is not registered).
func (v *Validator) ValidateDelete(context.Context, *hppv1.HostPathProvisioner) (admission.Warnings, error) {
	return nil, nil
}

func invalid(cr *hppv1.HostPathProvisioner, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(hppv1.GroupVersion.WithKind("HostPathProvisioner").GroupKind(), cr.Name, errs)
}

// usage counts the volumes per pool (CSI PVs name their pool in volume
// attribute storagePool) and the legacy provisioner's PVs.
func usage(ctx context.Context, r client.Reader) (hppv1.Usage, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.List(ctx, pvs); err != nil {
		return hppv1.Usage{}, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	use := hppv1.Usage{PoolVolumes: map[string]int{}}
	for _, pv := range pvs.Items {
		switch {
		case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == contract.DriverName:
			use.PoolVolumes[pv.Spec.CSI.VolumeAttributes[contract.ParamStoragePool]]++
		case pv.Annotations[contract.AnnProvisionedBy] == contract.LegacyProvisionerName:
			use.LegacyVolumes++
		}
	}
	return use, nil
}
