package kit

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// DeleteClaimsAndWait deletes every pod and claim in ns and waits until no
// PV bound to a claim of ns is left (their volumes deleted by the
// provisioner); it returns how long that took.
func DeleteClaimsAndWait(ctx context.Context, client kubernetes.Interface, ns string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return 0, err
	}
	if err := client.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return 0, err
	}
	err := Poll(ctx, timeout, "volumes deleted", func(ctx context.Context) (bool, string, error) {
		pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", Retry(err)
		}
		left := 0
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d PVs left", left), nil
	})
	return time.Since(start), err
}
