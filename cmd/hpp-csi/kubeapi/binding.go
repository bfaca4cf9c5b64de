// Package kubeapi is hpp-csi's only use of the Kubernetes API: telling an
// Immediate StorageClass from a WaitForFirstConsumer one.
//
// It issues two GETs with client-go's transport (auth, TLS, kubeconfig) but
// decodes into two small structs instead of importing the typed clientset:
// that package registers every API group at start and costs the node plugin
// over 10 MiB of resident memory it would carry on every node for two reads.
package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// BindingModes reads claims and StorageClasses.
type BindingModes struct {
	host   string
	client *http.Client
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
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return NewForHost(cfg.Host, client), nil
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
