// Package kubeapi is hpp-csi's only use of the Kubernetes API: telling an
// Immediate StorageClass from a WaitForFirstConsumer one (BindingModes),
// and reading the claims, volumes and snapshots that decide whether another
// node may stream a clone's source (Sources, for the peer transport), and
// whether the claim a copy from another node was made for is gone (Sources,
// for the sweep of copies no CreateVolume collected).
//
// It issues GETs with net/http and decodes into small structs, instead of
// importing client-go: its typed clientset registers every API group at
// start (over 10 MiB of resident memory on every node for a handful of
// reads), and even its rest and clientcmd packages cost about 4 MiB (see
// config.go).
package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
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

// Conn is the API server's address and a client with the credentials to
// reach it; hpp-csi makes one and gives it to every API client it runs
// (binding modes, claim sources, certificate requests), so the kubeconfig
// is read once and the clients share one connection pool.
type Conn struct {
	Host   string
	Client *http.Client
}

// Connect uses the kubeconfig file, or the pod's service account when it is
// empty.
func Connect(kubeconfig string) (Conn, error) {
	host, client, err := connect(kubeconfig)
	return Conn{Host: host, Client: client}, err
}

func connect(kubeconfig string) (string, *http.Client, error) {
	var host string
	var client *http.Client
	var err error
	if kubeconfig == "" {
		host, client, err = InClusterClient(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	} else {
		host, client, err = KubeconfigClient(kubeconfig)
	}
	if err != nil {
		return "", nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return host, client, nil
}

// NewForHost talks to the API server at host with client (Connect, or a
// test server).
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
	return get(ctx, b.client, b.host, path, into)
}

// StatusError is an API answer other than 200 OK.
type StatusError struct {
	// Method is the request's ("" for GET).
	Method string
	Path   string
	Status string
	Code   int
	Body   string
}

func (e *StatusError) Error() string {
	m := e.Method
	if m == "" {
		m = http.MethodGet
	}
	return fmt.Sprintf("%s %s: %s: %s", m, e.Path, e.Status, e.Body)
}

// IsNotFound reports whether err is the API's 404: the object does not
// exist.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// get decodes the JSON object at path into into.
func get(ctx context.Context, client *http.Client, host, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hpp-csi")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Path: path, Status: resp.Status, Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return json.Unmarshal(body, into)
}
