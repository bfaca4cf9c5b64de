package kit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Retry wraps an error of one Poll attempt that a later attempt may not
// have (the API briefly unavailable): Poll keeps going and reports it as
// the last state if time runs out.
func Retry(err error) error { return retryError{err} }

type retryError struct{ err error }

func (r retryError) Error() string { return r.err.Error() }

// Poll calls cond every 250 ms until it returns true or an error not
// wrapped by Retry, or until timeout; the timeout error names what was
// awaited and the last state cond reported.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (done bool, state string, err error)) error {
	return PollEvery(ctx, timeout, 250*time.Millisecond, what, cond)
}

// PollEvery is Poll with its own interval (a benchmark timing seconds
// polls more often).
func PollEvery(ctx context.Context, timeout, interval time.Duration, what string, cond func(context.Context) (done bool, state string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	for {
		done, state, err := cond(ctx)
		var r retryError
		if errors.As(err, &r) {
			state, err = r.Error(), nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if ctx.Err() == nil {
			// A state read as the deadline hit only says so.
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not reached in %v (last state: %s)", what, timeout, last)
		case <-t.C:
		}
	}
}

// WaitPodPhase waits until the pod reaches phase; a pod that ends in the
// other terminal phase is an error carrying its status.
func WaitPodPhase(ctx context.Context, c kubernetes.Interface, ns, name string, phase corev1.PodPhase, timeout time.Duration) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := Poll(ctx, timeout, fmt.Sprintf("pod %s/%s %s", ns, name, phase), func(ctx context.Context) (bool, string, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", Retry(err)
		}
		pod = p
		if p.Status.Phase == phase {
			return true, "", nil
		}
		if (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) && phase != p.Status.Phase {
			return false, "", fmt.Errorf("pod ended %s: %s", p.Status.Phase, PodSummary(p))
		}
		return false, PodSummary(p), nil
	})
	return pod, err
}

// PodSummary is a one-line account of a pod's state for error messages.
func PodSummary(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s node=%q", p.Status.Phase, p.Spec.NodeName)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			fmt.Fprintf(&b, " %s waiting %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			fmt.Fprintf(&b, " %s terminated exit=%d %s %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason, cs.State.Terminated.Message)
		}
	}
	return b.String()
}

// WaitPVCBound waits until the claim is Bound and returns it.
func WaitPVCBound(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration) (*corev1.PersistentVolumeClaim, error) {
	var pvc *corev1.PersistentVolumeClaim
	err := Poll(ctx, timeout, fmt.Sprintf("claim %s/%s Bound", ns, name), func(ctx context.Context) (bool, string, error) {
		p, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", Retry(err)
		}
		pvc = p
		return p.Status.Phase == corev1.ClaimBound, fmt.Sprintf("phase %s, events: %s", p.Status.Phase, Events(ctx, c, ns, "PersistentVolumeClaim", name)), nil
	})
	return pvc, err
}

// WaitGone waits until get reports NotFound.
func WaitGone(ctx context.Context, what string, timeout time.Duration, get func(context.Context) error) error {
	return Poll(ctx, timeout, what+" gone", func(ctx context.Context) (bool, string, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", Retry(err)
		}
		return false, "still there", nil
	})
}

// Events returns the reasons and messages of an object's events, oldest
// first, on one line.
func Events(ctx context.Context, c kubernetes.Interface, ns, kind, name string) string {
	list, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": kind, "involvedObject.name": name,
	}.String()})
	if err != nil {
		return "(events: " + err.Error() + ")"
	}
	var parts []string
	for _, e := range list.Items {
		parts = append(parts, e.Reason+": "+e.Message)
	}
	return strings.Join(parts, " | ")
}

// PodLogs returns the pod's log.
func PodLogs(ctx context.Context, c kubernetes.Interface, ns, name string) (string, error) {
	b, err := c.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(b), err
}
