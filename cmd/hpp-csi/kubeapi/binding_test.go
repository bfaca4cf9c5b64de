package kubeapi

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestImmediateClass(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	imm := storagev1.VolumeBindingImmediate
	client := fake.NewClientset(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "wffc"}, VolumeBindingMode: &wffc},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, VolumeBindingMode: &imm},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "unset"}},
		claim("a", "wffc"), claim("b", "now"), claim("c", "unset"),
	)
	b := NewForClient(client)
	for name, want := range map[string]bool{"a": false, "b": true, "c": true} {
		_, immediate, err := b.ImmediateClass(context.Background(), "ns", name)
		if err != nil || immediate != want {
			t.Errorf("claim %s: immediate %v, %v; want %v", name, immediate, err, want)
		}
	}
	if _, _, err := b.ImmediateClass(context.Background(), "ns", "missing"); err == nil {
		t.Error("missing claim: no error")
	}
}

func claim(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)},
	}
}
