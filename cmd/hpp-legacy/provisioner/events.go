package provisioner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Event reasons this package emits itself. Refusals in Provision and Delete
// reach the user through the library's ProvisioningFailed and
// VolumeFailedDelete events instead.
const (
	ReasonNoNode              = "NoNodeForClaim"
	ReasonSingleNode          = "SingleNodeVolume"
	ReasonMountOptionsIgnored = "MountOptionsIgnored"
	ReasonNoOwner             = "NoOwningNode"
)

// renotifyAfter bounds how often one process re-sends the same event; the
// API server keeps events for an hour, so a claim that stays stuck shows
// the event again after the old one expired.
const renotifyAfter = 10 * time.Minute

// eventSink writes events under a name derived from the object and the
// reason. Several nodes report some conditions (every node sees an
// unplaceable claim); the fixed name makes the first create win and the
// others fail with AlreadyExists, so the user sees one event, not one per
// node.
type eventSink struct {
	client kubernetes.Interface
	node   string
	now    func() time.Time
	log    *zap.Logger

	mu   sync.Mutex
	sent map[string]time.Time // event name -> when this process last sent it
}

func newEventSink(client kubernetes.Interface, node string, now func() time.Time, log *zap.Logger) *eventSink {
	return &eventSink{client: client, node: node, now: now, log: log, sent: map[string]time.Time{}}
}

func (e *eventSink) claim(ctx context.Context, c *v1.PersistentVolumeClaim, eventType, reason, message string) {
	e.emit(ctx, c.Namespace, v1.ObjectReference{
		APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name,
		UID: c.UID, ResourceVersion: c.ResourceVersion,
	}, eventType, reason, message)
}

func (e *eventSink) volume(ctx context.Context, pv *v1.PersistentVolume, eventType, reason, message string) {
	// Events about cluster-scoped objects live in "default", as
	// client-go's recorder puts them.
	e.emit(ctx, metav1.NamespaceDefault, v1.ObjectReference{
		APIVersion: "v1", Kind: "PersistentVolume", Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion,
	}, eventType, reason, message)
}

func (e *eventSink) emit(ctx context.Context, namespace string, ref v1.ObjectReference, eventType, reason, message string) {
	name := eventName(ref, reason)
	now := e.now()
	if !e.due(name, now) {
		return
	}
	ts := metav1.NewTime(now)
	ev := &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              v1.EventSource{Component: contract.LegacyProvisionerName, Host: e.node},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: contract.LegacyProvisionerName,
		ReportingInstance:   e.node,
	}
	_, err := e.client.CoreV1().Events(namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.log.Warn("event not recorded", zap.String("object", ref.Kind+" "+ref.Namespace+"/"+ref.Name), zap.String("reason", reason), zap.Error(err))
		e.forget(name)
	}
}

// due records that name is being sent now, unless it was sent recently.
func (e *eventSink) due(name string, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if last, ok := e.sent[name]; ok && now.Sub(last) < renotifyAfter {
		return false
	}
	if len(e.sent) > 1024 {
		for k, t := range e.sent {
			if now.Sub(t) >= renotifyAfter {
				delete(e.sent, k)
			}
		}
	}
	e.sent[name] = now
	return true
}

func (e *eventSink) forget(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sent, name)
}

// eventName is "<object name>.hpp-<hash of uid and reason>", cut to the 253
// characters an object name may have.
func eventName(ref v1.ObjectReference, reason string) string {
	sum := sha256.Sum256([]byte(string(ref.UID) + "/" + ref.Name + "/" + reason))
	suffix := ".hpp-" + hex.EncodeToString(sum[:6])
	base := ref.Name
	if max := 253 - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], ".-")
	}
	return base + suffix
}
