package kubeapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Sources reads the four kinds of object that decide whether a node may
// stream a clone's source from another (cmd/hpp-csi/peer): claims,
// PersistentVolumes, VolumeSnapshots and VolumeSnapshotContents; and Nodes,
// for the address of the node that holds a source (cmd/hpp-csi/remote).
// The sweep of uncollected copies reads claims and PVs with it too
// (collect.go). GETs only; the service account needs get on persistentvolumeclaims,
// persistentvolumes, nodes, volumesnapshots and volumesnapshotcontents
// (snapshot.storage.k8s.io).
type Sources struct {
	host   string
	client *http.Client
}

// NewSourcesForHost talks to the API server at host with client (Connect,
// or a test server).
func NewSourcesForHost(host string, client *http.Client) *Sources {
	return &Sources{host: strings.TrimSuffix(host, "/"), client: client}
}

// Ref names a claim's data source (spec.dataSourceRef, else
// spec.dataSource). Namespace is set only by a dataSourceRef that crosses
// namespaces.
type Ref struct {
	APIGroup  string
	Kind      string
	Name      string
	Namespace string
}

// Claim is what the peer transport reads of a PersistentVolumeClaim.
type Claim struct {
	Namespace, Name, UID string
	Annotations          map[string]string
	// VolumeName is spec.volumeName: the PV it is bound to, if any.
	VolumeName string
	// DataSource is spec.dataSourceRef, or spec.dataSource when that is
	// not set; nil when the claim has neither.
	DataSource *Ref
}

// Volume is what the peer transport reads of a PersistentVolume.
type Volume struct {
	Name string
	// Driver and Handle are spec.csi.driver and spec.csi.volumeHandle
	// (empty for a PV that is not CSI).
	Driver, Handle string
	// ClaimNamespace, ClaimName and ClaimUID are spec.claimRef.
	ClaimNamespace, ClaimName, ClaimUID string
	// NodeTerms are spec.nodeAffinity.required.nodeSelectorTerms (ORed),
	// each the list of its matchExpressions (ANDed).
	NodeTerms [][]Requirement
}

// Requirement is one match expression of a node selector term.
type Requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// Snapshot is what the peer transport reads of a VolumeSnapshot.
type Snapshot struct {
	Namespace, Name, UID string
	// ContentName is status.boundVolumeSnapshotContentName.
	ContentName string
}

// SnapshotContent is what the peer transport reads of a
// VolumeSnapshotContent.
type SnapshotContent struct {
	Name string
	// Driver is spec.driver, Handle status.snapshotHandle.
	Driver, Handle string
	// SnapshotNamespace, SnapshotName and SnapshotUID are
	// spec.volumeSnapshotRef.
	SnapshotNamespace, SnapshotName, SnapshotUID string
	// SourceVolumeHandle is spec.source.volumeHandle: the volume a dynamic
	// snapshot was taken of (empty for a pre-provisioned one).
	SourceVolumeHandle string
	Labels             map[string]string
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	UID         string            `json:"uid"`
	Annotations map[string]string `json:"annotations"`
	Labels      map[string]string `json:"labels"`
}

type objectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

type typedRef struct {
	APIGroup  *string `json:"apiGroup"`
	Kind      string  `json:"kind"`
	Name      string  `json:"name"`
	Namespace *string `json:"namespace"`
}

func (r *typedRef) ref() *Ref {
	if r == nil {
		return nil
	}
	out := &Ref{Kind: r.Kind, Name: r.Name}
	if r.APIGroup != nil {
		out.APIGroup = *r.APIGroup
	}
	if r.Namespace != nil {
		out.Namespace = *r.Namespace
	}
	return out
}

// Claim reads the claim namespace/name. A missing claim is an error that
// IsNotFound recognises.
func (s *Sources) Claim(ctx context.Context, namespace, name string) (*Claim, error) {
	var pvc struct {
		Metadata objectMeta `json:"metadata"`
		Spec     struct {
			VolumeName    string    `json:"volumeName"`
			DataSource    *typedRef `json:"dataSource"`
			DataSourceRef *typedRef `json:"dataSourceRef"`
		} `json:"spec"`
	}
	if err := s.get(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/persistentvolumeclaims/"+url.PathEscape(name), &pvc); err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", namespace, name, err)
	}
	c := &Claim{Namespace: pvc.Metadata.Namespace, Name: pvc.Metadata.Name, UID: pvc.Metadata.UID,
		Annotations: pvc.Metadata.Annotations, VolumeName: pvc.Spec.VolumeName, DataSource: pvc.Spec.DataSourceRef.ref()}
	if c.DataSource == nil {
		c.DataSource = pvc.Spec.DataSource.ref()
	}
	return c, nil
}

// Volume reads the PersistentVolume name.
func (s *Sources) Volume(ctx context.Context, name string) (*Volume, error) {
	var pv struct {
		Metadata objectMeta `json:"metadata"`
		Spec     struct {
			ClaimRef *objectRef `json:"claimRef"`
			CSI      *struct {
				Driver       string `json:"driver"`
				VolumeHandle string `json:"volumeHandle"`
			} `json:"csi"`
			NodeAffinity *struct {
				Required *struct {
					Terms []struct {
						MatchExpressions []Requirement `json:"matchExpressions"`
					} `json:"nodeSelectorTerms"`
				} `json:"required"`
			} `json:"nodeAffinity"`
		} `json:"spec"`
	}
	if err := s.get(ctx, "/api/v1/persistentvolumes/"+url.PathEscape(name), &pv); err != nil {
		return nil, fmt.Errorf("PersistentVolume %s: %w", name, err)
	}
	v := &Volume{Name: pv.Metadata.Name}
	if pv.Spec.CSI != nil {
		v.Driver, v.Handle = pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle
	}
	if r := pv.Spec.ClaimRef; r != nil {
		v.ClaimNamespace, v.ClaimName, v.ClaimUID = r.Namespace, r.Name, r.UID
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, t := range a.Required.Terms {
			v.NodeTerms = append(v.NodeTerms, t.MatchExpressions)
		}
	}
	return v, nil
}

// snapshotAPI is the VolumeSnapshot API group and version
// (external-snapshotter v4 and later).
const snapshotAPI = "/apis/snapshot.storage.k8s.io/v1"

// Snapshot reads the VolumeSnapshot namespace/name.
func (s *Sources) Snapshot(ctx context.Context, namespace, name string) (*Snapshot, error) {
	var vs struct {
		Metadata objectMeta `json:"metadata"`
		Status   *struct {
			BoundContentName *string `json:"boundVolumeSnapshotContentName"`
		} `json:"status"`
	}
	if err := s.get(ctx, snapshotAPI+"/namespaces/"+url.PathEscape(namespace)+"/volumesnapshots/"+url.PathEscape(name), &vs); err != nil {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s: %w", namespace, name, err)
	}
	out := &Snapshot{Namespace: vs.Metadata.Namespace, Name: vs.Metadata.Name, UID: vs.Metadata.UID}
	if vs.Status != nil && vs.Status.BoundContentName != nil {
		out.ContentName = *vs.Status.BoundContentName
	}
	return out, nil
}

// SnapshotContent reads the VolumeSnapshotContent name.
func (s *Sources) SnapshotContent(ctx context.Context, name string) (*SnapshotContent, error) {
	var c struct {
		Metadata objectMeta `json:"metadata"`
		Spec     struct {
			Driver            string    `json:"driver"`
			VolumeSnapshotRef objectRef `json:"volumeSnapshotRef"`
			Source            struct {
				VolumeHandle *string `json:"volumeHandle"`
			} `json:"source"`
		} `json:"spec"`
		Status *struct {
			SnapshotHandle *string `json:"snapshotHandle"`
		} `json:"status"`
	}
	if err := s.get(ctx, snapshotAPI+"/volumesnapshotcontents/"+url.PathEscape(name), &c); err != nil {
		return nil, fmt.Errorf("VolumeSnapshotContent %s: %w", name, err)
	}
	out := &SnapshotContent{Name: c.Metadata.Name, Driver: c.Spec.Driver,
		SnapshotNamespace: c.Spec.VolumeSnapshotRef.Namespace, SnapshotName: c.Spec.VolumeSnapshotRef.Name,
		SnapshotUID: c.Spec.VolumeSnapshotRef.UID, Labels: c.Metadata.Labels}
	if c.Spec.Source.VolumeHandle != nil {
		out.SourceVolumeHandle = *c.Spec.Source.VolumeHandle
	}
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		out.Handle = *c.Status.SnapshotHandle
	}
	return out, nil
}

func (s *Sources) get(ctx context.Context, path string, into any) error {
	return get(ctx, s.client, s.host, path, into)
}
