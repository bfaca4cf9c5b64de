// Package kubeapi is hpp-csi's only use of the Kubernetes API: telling an
// Immediate StorageClass from a WaitForFirstConsumer one.
//
// It issues two GETs with net/http and decodes into two small structs,
// instead of importing client-go: its typed clientset registers every API
// group at start (over 10 MiB of resident memory on every node for two
// reads), and even its rest and clientcmd packages cost about 4 MiB (see
// config.go).
package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// BindingModes reads claims and StorageClasses.
type BindingModes struct {
	host   string
	client *http.Client
}

// New connects with the kubeconfig file, or in-cluster when it is empty.
func New(kubeconfig string) (*BindingModes, error) {
	var host string
	var client *http.Client
	var err error
	if kubeconfig == "" {
		host, client, err = InClusterClient(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	} else {
		host, client, err = KubeconfigClient(kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return NewForHost(host, client), nil
}

// NewForHost talks to the API server at host with client (tests).
func NewForHost(host string, client *http.Client) *BindingModes {
	return &BindingModes{host: strings.TrimSuffix(host, "/"), client: client}
}

type claim struct {
	Spec struct {
		StorageClassName *string `json:"storageClassName"`
	} `json:"spec"`
}

type storageClass struct {
	VolumeBindingMode *string `json:"volumeBindingMode"`
}

func (b *BindingModes) ImmediateClass(ctx context.Context, namespace, name string) (string, bool, error) {
	var pvc claim
	if err := b.get(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/persistentvolumeclaims/"+url.PathEscape(name), &pvc); err != nil {
		return "", false, fmt.Errorf("claim %s/%s: %w", namespace, name, err)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return "", false, nil
	}
	class := *pvc.Spec.StorageClassName
	var sc storageClass
	if err := b.get(ctx, "/apis/storage.k8s.io/v1/storageclasses/"+url.PathEscape(class), &sc); err != nil {
		return class, false, fmt.Errorf("StorageClass %s: %w", class, err)
	}
	// An unset mode defaults to Immediate in the API.
	immediate := sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == "Immediate"
	return class, immediate, nil
}

func (b *BindingModes) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hpp-csi")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, into)
}
