package peer

import (
	"context"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// The data source kinds a clone names.
const (
	claimKind         = "PersistentVolumeClaim"
	snapshotKind      = "VolumeSnapshot"
	snapshotAPIGroup  = "snapshot.storage.k8s.io"
	claimAPIGroupCore = ""
)

// claimCheck is the Authorizer described in the package documentation:
// the claim being created must have selected the requester and name the
// source as its data source.
type claimCheck struct {
	api    *kubeapi.Sources
	driver string
}

// NewClaimCheck authorizes from the API objects api reads; driver is this
// driver's name (hpp-csi's --drivername, contract.DriverName by default),
// which the source's PV or snapshot content must name.
func NewClaimCheck(api *kubeapi.Sources, driver string) Authorizer {
	if driver == "" {
		driver = contract.DriverName
	}
	return &claimCheck{api: api, driver: driver}
}

func (c *claimCheck) Authorize(ctx context.Context, r Request) error {
	claim, err := c.api.Claim(ctx, r.Namespace, r.Claim)
	if kubeapi.IsNotFound(err) {
		return refuse("claim %s/%s does not exist", r.Namespace, r.Claim)
	}
	if err != nil {
		return err
	}
	if claim.VolumeName != "" {
		return refuse("claim %s/%s is already bound to %s: there is nothing left to provision for it", r.Namespace, r.Claim, claim.VolumeName)
	}
	selected, ok := claim.Annotations[contract.AnnSelectedNode]
	switch {
	case !ok || selected == "":
		return refuse("claim %s/%s has no %s annotation: nothing ties it to a node (with an Immediate StorageClass, csi-provisioner writes it only when deployed per node with --node-deployment-immediate-binding, its default)",
			r.Namespace, r.Claim, contract.AnnSelectedNode)
	case selected != r.Node:
		return refuse("claim %s/%s selected node %q, not the requester %q", r.Namespace, r.Claim, selected, r.Node)
	}
	src := claim.DataSource
	if src == nil {
		return refuse("claim %s/%s has no data source", r.Namespace, r.Claim)
	}
	if src.Namespace != "" && src.Namespace != r.Namespace {
		return refuse("claim %s/%s names a data source in namespace %s: cross-namespace data sources are not supported", r.Namespace, r.Claim, src.Namespace)
	}
	switch r.Kind {
	case KindVolume:
		if src.Kind != claimKind || src.APIGroup != claimAPIGroupCore {
			return refuse("claim %s/%s's data source is %s, not a %s", r.Namespace, r.Claim, describe(src), claimKind)
		}
		return c.volume(ctx, r, src.Name)
	case KindSnapshot:
		if src.Kind != snapshotKind || src.APIGroup != snapshotAPIGroup {
			return refuse("claim %s/%s's data source is %s, not a %s.%s", r.Namespace, r.Claim, describe(src), snapshotKind, snapshotAPIGroup)
		}
		return c.snapshot(ctx, r, src.Name)
	}
	return refuse("unknown kind %q", r.Kind)
}

// volume: the source claim is bound, both ways, to a PV of this driver
// whose handle is r.ID.
func (c *claimCheck) volume(ctx context.Context, r Request, name string) error {
	src, err := c.api.Claim(ctx, r.Namespace, name)
	if kubeapi.IsNotFound(err) {
		return refuse("data source claim %s/%s does not exist", r.Namespace, name)
	}
	if err != nil {
		return err
	}
	if src.VolumeName == "" {
		return refuse("data source claim %s/%s is not bound", r.Namespace, name)
	}
	pv, err := c.api.Volume(ctx, src.VolumeName)
	if kubeapi.IsNotFound(err) {
		return refuse("PersistentVolume %s of data source claim %s/%s does not exist", src.VolumeName, r.Namespace, name)
	}
	if err != nil {
		return err
	}
	switch {
	case pv.ClaimNamespace != r.Namespace || pv.ClaimName != name || pv.ClaimUID != src.UID:
		return refuse("PersistentVolume %s is not bound to data source claim %s/%s", pv.Name, r.Namespace, name)
	case pv.Driver != c.driver:
		return refuse("PersistentVolume %s of data source claim %s/%s is not a volume of %s", pv.Name, r.Namespace, name, c.driver)
	case pv.Handle != r.ID:
		return refuse("data source claim %s/%s is volume %q, not %q", r.Namespace, name, pv.Handle, r.ID)
	}
	return nil
}

// snapshot: the VolumeSnapshot is bound, both ways, to a content of this
// driver whose handle is r.ID.
func (c *claimCheck) snapshot(ctx context.Context, r Request, name string) error {
	vs, err := c.api.Snapshot(ctx, r.Namespace, name)
	if kubeapi.IsNotFound(err) {
		return refuse("data source VolumeSnapshot %s/%s does not exist", r.Namespace, name)
	}
	if err != nil {
		return err
	}
	if vs.ContentName == "" {
		return refuse("data source VolumeSnapshot %s/%s is not bound to a content", r.Namespace, name)
	}
	content, err := c.api.SnapshotContent(ctx, vs.ContentName)
	if kubeapi.IsNotFound(err) {
		return refuse("VolumeSnapshotContent %s of data source VolumeSnapshot %s/%s does not exist", vs.ContentName, r.Namespace, name)
	}
	if err != nil {
		return err
	}
	switch {
	case content.SnapshotNamespace != r.Namespace || content.SnapshotName != name || content.SnapshotUID != vs.UID:
		return refuse("VolumeSnapshotContent %s is not bound to data source VolumeSnapshot %s/%s", content.Name, r.Namespace, name)
	case content.Driver != c.driver:
		return refuse("VolumeSnapshotContent %s of data source VolumeSnapshot %s/%s is not a snapshot of %s", content.Name, r.Namespace, name, c.driver)
	case content.Handle != r.ID:
		return refuse("data source VolumeSnapshot %s/%s is snapshot %q, not %q", r.Namespace, name, content.Handle, r.ID)
	}
	return nil
}

func describe(r *kubeapi.Ref) string {
	group := r.APIGroup
	if group == "" {
		group = "core"
	}
	return r.Kind + " " + r.Name + " (API group " + group + ")"
}
