// Package provisioner is the legacy hostPath provisioner's logic: which node
// serves a claim, the directory it gets, the PersistentVolume that points at
// it, and when a directory may be removed. It plugs into
// sig-storage-lib-external-provisioner's controller, which owns the work
// queues, retries and PV creation; every side effect here (directories,
// SELinux labels, statfs, the Node object) sits behind an interface so the
// logic is tested with fakes.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/internal/capacity"
	"github.com/hostpath-provisioner/hpp/internal/dirvol"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
	"github.com/hostpath-provisioner/hpp/internal/selinux"
)

// The names shared with the KubeVirt hostpath provisioner (its provisioner
// name and annotations) are in internal/contract: PVs it made carry the same
// annotations, so either provisioner can delete the other's volumes after a
// switch in either direction.

// NodeGetter reads a Node (a lister from an informer in production).
type NodeGetter interface {
	Get(name string) (*v1.Node, error)
}

// ClassGetter reads a StorageClass (a lister from an informer in production).
type ClassGetter interface {
	Get(name string) (*storagev1.StorageClass, error)
}

// Volumes is the directory store for PV_DIR (*dirvol.Store).
type Volumes interface {
	Create(ctx context.Context, id string, spec dirvol.Spec) (dirvol.Volume, bool, error)
	Get(ctx context.Context, id string) (dirvol.Volume, error)
	Delete(ctx context.Context, id string) error
}

// StatFunc reports the filesystem figures of a path (capacity.Statfs).
type StatFunc func(path string) (capacity.Stats, error)

// Config is everything a Provisioner needs; all fields are required except
// Logger, Metrics and Now.
type Config struct {
	NodeName        string
	PVDir           string // absolute and clean
	UseNamingPrefix bool
	Headroom        capacity.Headroom

	Client  kubernetes.Interface // claim updates and events
	Nodes   NodeGetter
	Classes ClassGetter
	Volumes Volumes
	Labeler selinux.Labeler
	Statfs  StatFunc

	Logger  *zap.Logger
	Metrics *Metrics
	Now     func() time.Time
}

// Provisioner implements the library's Provisioner, Qualifier and
// DeletionGuard for one node.
type Provisioner struct {
	node     string
	pvDir    string
	prefix   bool
	headroom capacity.Headroom

	client  kubernetes.Interface
	nodes   NodeGetter
	classes ClassGetter
	volumes Volumes
	labeler selinux.Labeler
	statfs  StatFunc
	log     *zap.Logger
	metrics *Metrics
	events  *eventSink

	inflight sync.WaitGroup
}

// New checks cfg and returns a Provisioner.
func New(cfg Config) (*Provisioner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := cfg.Metrics
	if m == nil {
		m = NewMetrics()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Provisioner{
		node:     cfg.NodeName,
		pvDir:    cfg.PVDir,
		prefix:   cfg.UseNamingPrefix,
		headroom: cfg.Headroom,
		client:   cfg.Client,
		nodes:    cfg.Nodes,
		classes:  cfg.Classes,
		volumes:  cfg.Volumes,
		labeler:  cfg.Labeler,
		statfs:   cfg.Statfs,
		log:      log,
		metrics:  m,
		events:   newEventSink(cfg.Client, cfg.NodeName, now, log),
	}, nil
}

func (c Config) validate() error {
	var errs []error
	field := func(name, reason string) { errs = append(errs, &fieldrule.FieldError{Field: name, Reason: reason}) }
	if c.NodeName == "" {
		field("NodeName", "must not be empty")
	}
	if err := fieldrule.CheckAbsPath("PVDir", c.PVDir, true); err != nil {
		errs = append(errs, err)
	} else if c.PVDir == "/" {
		field("PVDir", "must not be the root directory")
	}
	if err := c.Headroom.Validate("Headroom"); err != nil {
		errs = append(errs, err)
	}
	for name, missing := range map[string]bool{
		"Client": c.Client == nil, "Nodes": c.Nodes == nil, "Classes": c.Classes == nil,
		"Volumes": c.Volumes == nil, "Labeler": c.Labeler == nil, "Statfs": c.Statfs == nil,
	} {
		if missing {
			field(name, "must be set")
		}
	}
	return errors.Join(errs...)
}

// Wait blocks until every Provision and Delete in flight has returned, or
// ctx ends. The library's Run returns on shutdown without waiting for its
// workers; this lets main finish their work before the process exits.
func (p *Provisioner) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		p.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for volume operations in flight: %w", ctx.Err())
	}
}

func (p *Provisioner) track() func() {
	p.inflight.Add(1)
	return p.inflight.Done
}
