// Package kubeapi is hpp-csi's only use of the Kubernetes API: telling an
// Immediate StorageClass from a WaitForFirstConsumer one.
package kubeapi

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// BindingModes reads claims and StorageClasses.
type BindingModes struct {
	client kubernetes.Interface
}

// New connects with the kubeconfig file, or in-cluster when it is empty.
func New(kubeconfig string) (*BindingModes, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.UserAgent = "hpp-csi"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return &BindingModes{client: client}, nil
}

// NewForClient is for tests.
func NewForClient(c kubernetes.Interface) *BindingModes { return &BindingModes{client: c} }

func (b *BindingModes) ImmediateClass(ctx context.Context, namespace, claim string) (string, bool, error) {
	pvc, err := b.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("claim %s/%s: %w", namespace, claim, err)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return "", false, nil
	}
	name := *pvc.Spec.StorageClassName
	sc, err := b.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return name, false, fmt.Errorf("StorageClass %s: %w", name, err)
	}
	immediate := sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate
	return name, immediate, nil
}
