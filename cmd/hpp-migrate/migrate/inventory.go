package migrate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Collect reads the inventory: one List of each kind (PVs, claims, pods,
// nodes, CSINodes, StorageClasses) and every backup in backups.Dir.
func Collect(ctx context.Context, c kubernetes.Interface, backups Backups) (Inventory, error) {
	var inv Inventory
	opts := metav1.ListOptions{}
	pvs, err := c.CoreV1().PersistentVolumes().List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	inv.PVs = pvs.Items
	claims, err := c.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	inv.Claims = claims.Items
	pods, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list Pods: %w", err)
	}
	inv.Pods = pods.Items
	nodes, err := c.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list Nodes: %w", err)
	}
	inv.Nodes = nodes.Items
	csiNodes, err := c.StorageV1().CSINodes().List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list CSINodes: %w", err)
	}
	inv.CSINodes = csiNodes.Items
	classes, err := c.StorageV1().StorageClasses().List(ctx, opts)
	if err != nil {
		return inv, fmt.Errorf("list StorageClasses: %w", err)
	}
	inv.StorageClasses = classes.Items
	inv.Backups = map[string]*corev1.PersistentVolume{}
	if backups.Dir == "" {
		return inv, nil
	}
	names, err := backups.Names()
	if err != nil {
		return inv, err
	}
	for _, n := range names {
		pv, err := backups.Load(n)
		if err != nil {
			return inv, err
		}
		inv.Backups[n] = pv
	}
	return inv, nil
}
