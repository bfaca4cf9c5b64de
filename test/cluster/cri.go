package cluster

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeAllPodSandboxes stops and removes every pod sandbox through the CRI,
// as kubelet would: containerd kills the containers, runs CNI DEL (which
// frees the pod's address and veth) and unmounts their filesystems.
// Returns how many sandboxes it removed.
func removeAllPodSandboxes(ctx context.Context, sock string) (int, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, fmt.Errorf("cri %s: %w", sock, err)
	}
	defer func() { _ = conn.Close() }()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return 0, fmt.Errorf("cri list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range resp.GetItems() {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("cri stop sandbox %s (%s/%s): %w", sb.GetId(), sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("cri remove sandbox %s: %w", sb.GetId(), err))
		}
	}
	return len(resp.GetItems()), errors.Join(errs...)
}
