package peer

import (
	"context"
	"fmt"

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
	if err != nil {
		return refuseMissing(err, "claim %s/%s does not exist", r.Namespace, r.Claim)
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
	source := fmt.Sprintf("data source claim %s/%s", r.Namespace, name)
	src, err := c.api.Claim(ctx, r.Namespace, name)
	if err != nil {
		return refuseMissing(err, "%s does not exist", source)
	}
	if src.VolumeName == "" {
		return refuse("%s is not bound", source)
	}
	pv, err := c.api.Volume(ctx, src.VolumeName)
	if err != nil {
		return refuseMissing(err, "PersistentVolume %s of %s does not exist", src.VolumeName, source)
	}
	return c.checkBound(r, source, binding{kind: "PersistentVolume", name: pv.Name, made: "volume", driver: pv.Driver, handle: pv.Handle,
		bindsBack: pv.ClaimNamespace == r.Namespace && pv.ClaimName == name && pv.ClaimUID == src.UID})
}

// snapshot: the VolumeSnapshot is bound, both ways, to a content of this
// driver whose handle is r.ID.
func (c *claimCheck) snapshot(ctx context.Context, r Request, name string) error {
	source := fmt.Sprintf("data source VolumeSnapshot %s/%s", r.Namespace, name)
	vs, err := c.api.Snapshot(ctx, r.Namespace, name)
	if err != nil {
		return refuseMissing(err, "%s does not exist", source)
	}
	if vs.ContentName == "" {
		return refuse("%s is not bound to a content", source)
	}
	content, err := c.api.SnapshotContent(ctx, vs.ContentName)
	if err != nil {
		return refuseMissing(err, "VolumeSnapshotContent %s of %s does not exist", vs.ContentName, source)
	}
	return c.checkBound(r, source, binding{kind: "VolumeSnapshotContent", name: content.Name, made: "snapshot", driver: content.Driver, handle: content.Handle,
		bindsBack: content.SnapshotNamespace == r.Namespace && content.SnapshotName == name && content.SnapshotUID == vs.UID})
}

// refuseMissing is err, or a refusal saying what is missing when the API
// server answered NotFound: a missing object is a decision, not a failure.
func refuseMissing(err error, format string, args ...any) error {
	if kubeapi.IsNotFound(err) {
		return refuse(format, args...)
	}
	return err
}

// binding is the cluster object a data source is bound to (a claim's
// PersistentVolume, a VolumeSnapshot's content), as checkBound reads it.
type binding struct {
	kind, name string
	// made is what this driver made that the object stands for: "volume"
	// or "snapshot".
	made string
	// bindsBack: the object names the source, uid included, in return.
	bindsBack      bool
	driver, handle string
}

// checkBound: b binds source in return, is this driver's, and its handle
// is the one asked for; both source kinds say so in the same words.
func (c *claimCheck) checkBound(r Request, source string, b binding) error {
	switch {
	case !b.bindsBack:
		return refuse("%s %s is not bound to %s", b.kind, b.name, source)
	case b.driver != c.driver:
		return refuse("%s %s of %s is not a %s of %s", b.kind, b.name, source, b.made, c.driver)
	case b.handle != r.ID:
		return refuse("%s is %s %q, not %q", source, b.made, b.handle, r.ID)
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
