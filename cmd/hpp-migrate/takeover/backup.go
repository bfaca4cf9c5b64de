package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Backup is what the switch saved for the way back: upstream's install
// objects as they were (operator Deployment, CRD, RBAC, webhook), its
// node workloads as its operator last wrote them, and the objects hpp's
// install applied.
type Backup struct {
	Objects []*unstructured.Unstructured
	// Workloads are the DaemonSets and pool mounter Deployments of
	// upstream's operator (back_workloads.go says why they are kept).
	// Empty in a backup made before hpp-migrate saved them.
	Workloads []*unstructured.Unstructured
	// Upstream are all the objects of upstream's at the switch: the way
	// back never deletes one of these names, even where hpp's operator
	// wrote it last and upstream's has not written it again yet (it
	// makes them again, and a ServiceAccount it has to make again costs
	// a deleted CSI DaemonSet: seen on the real node). Empty in a backup
	// made before hpp-migrate saved them.
	Upstream []Ref
	Applied  []Ref
}

const (
	backupObjectsKey   = "objects.json"
	backupWorkloadsKey = "workloads.json"
	backupUpstreamKey  = "upstream.json"
	backupAppliedKey   = "applied.json"
)

// backupCandidates are the live objects of upstream's install.
func backupCandidates(inv *Inventory) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, r := range Resources {
		for _, o := range inv.Live[r.Kind] {
			if isUpstreamInstallName(o.GetKind(), o.GetName()) && isUpstreams(o) || o.GetKind() == "CustomResourceDefinition" && o.GetName() == CRDName {
				out = append(out, cleaned(o))
			}
		}
	}
	return out
}

// cleaned is o without what the API server sets.
func cleaned(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	return c
}

// backup writes the backup Secret unless one exists: a resumed switch
// keeps the first (upstream's objects are hpp's by then). The list of
// applied objects is refreshed either way.
func (r *Runner) backup(ctx context.Context, inv *Inventory) error {
	applied := make([]Ref, 0, len(inv.Manifests))
	for _, m := range inv.Manifests {
		applied = append(applied, refOf(m))
	}
	appliedJSON, err := json.Marshal(applied)
	if err != nil {
		return err
	}
	live, err := r.get(rSecret, BackupSecret)
	if err != nil {
		return err
	}
	if live != nil {
		r.say("      backup %s kept (made by the first run)", BackupSecret)
		if old, _, _ := unstructured.NestedString(live.Object, "data", backupAppliedKey); old == b64(appliedJSON) {
			return nil
		}
		if err := unstructured.SetNestedField(live.Object, b64(appliedJSON), "data", backupAppliedKey); err != nil {
			return err
		}
		if _, err := r.res(rSecret).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update the backup Secret %s: %w", BackupSecret, err)
		}
		r.did("recorded in %s the %d objects this install applies", BackupSecret, len(applied))
		return nil
	}
	objs := backupCandidates(inv)
	objsJSON, err := json.Marshal(objs)
	if err != nil {
		return err
	}
	workloads := workloadCandidates(inv)
	workloadsJSON, err := json.Marshal(workloads)
	if err != nil {
		return err
	}
	upstreamJSON, err := json.Marshal(upstreamRefs(inv))
	if err != nil {
		return err
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": BackupSecret, "namespace": r.Namespace,
			"labels": map[string]any{ManagedByLabel: "hpp-migrate"}},
		"data": map[string]any{backupObjectsKey: b64(objsJSON), backupWorkloadsKey: b64(workloadsJSON), backupUpstreamKey: b64(upstreamJSON), backupAppliedKey: b64(appliedJSON)},
	}}
	if _, err := r.res(rSecret).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the backup Secret %s: %w", BackupSecret, err)
	}
	r.did("created %s", BackupSecret)
	for _, o := range append(objs, workloads...) {
		r.say("      saved %s", refOf(o))
	}
	return nil
}

// errNoBackup: the namespace has no backup Secret.
var errNoBackup = errors.New("no backup")

// ReadBackup reads the backup Secret of the namespace.
func (r *Runner) ReadBackup(ctx context.Context) (*Backup, error) {
	s, err := r.get(rSecret, BackupSecret)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("no Secret %s/%s: the way back needs the backup `hpp-migrate takeover` made (without it, reinstall upstream's operator from its deploy/): %w", r.Namespace, BackupSecret, errNoBackup)
	}
	var b Backup
	for key, into := range map[string]any{backupObjectsKey: &b.Objects, backupWorkloadsKey: &b.Workloads, backupUpstreamKey: &b.Upstream, backupAppliedKey: &b.Applied} {
		enc, found, _ := unstructured.NestedString(s.Object, "data", key)
		if !found && (key == backupWorkloadsKey || key == backupUpstreamKey) {
			continue // an older hpp-migrate's backup
		}
		raw, err := unb64(enc)
		if err != nil {
			return nil, fmt.Errorf("backup Secret %s key %s: %w", BackupSecret, key, err)
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return nil, fmt.Errorf("backup Secret %s key %s: %w", BackupSecret, key, err)
		}
	}
	return &b, nil
}

// workloadCandidates are upstream's node workloads: its operator's
// DaemonSets (CSI driver, legacy provisioner) and pool mounters.
func workloadCandidates(inv *Inventory) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, kind := range []string{"DaemonSet", "Deployment"} {
		for _, o := range inv.Live[kind] {
			if isNodeWorkload(o) && madeByUpstreamOperator(o) {
				out = append(out, cleaned(o))
			}
		}
	}
	return out
}

// upstreamRefs are the objects of upstream's the switch found.
func upstreamRefs(inv *Inventory) []Ref {
	var out []Ref
	for _, r := range Resources {
		for _, o := range inv.Live[r.Kind] {
			if isUpstreams(o) {
				out = append(out, refOf(o))
			}
		}
	}
	return out
}

// wasUpstreams says whether the switch found an object of upstream's
// under that kind and name.
func (b *Backup) wasUpstreams(kind, name string) bool {
	return slices.ContainsFunc(b.Upstream, func(r Ref) bool { return r.Kind == kind && r.Name == name })
}

// Find is the backed-up object of that kind and name, or nil.
func (b *Backup) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range b.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}
