package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// CSRs makes and reads CertificateSigningRequests: hpp-csi's request for
// its peer certificate (cmd/hpp-csi/peercert). It needs create and get on
// certificatesigningrequests, nothing else.
type CSRs struct {
	host   string
	client *http.Client
}

// NewCSRsForHost uses an address and client the caller made (Connect, or a
// test server).
func NewCSRsForHost(host string, client *http.Client) *CSRs {
	return &CSRs{host: host, client: client}
}

const csrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests"

// CSRSpec is what a request asks for.
type CSRSpec struct {
	Request           []byte   `json:"request"`
	SignerName        string   `json:"signerName"`
	Usages            []string `json:"usages"`
	ExpirationSeconds *int32   `json:"expirationSeconds,omitempty"`
}

// CSRStatus is a request's answer: the certificate once issued, and the
// conditions (Approved, Denied, Failed) with their messages.
type CSRStatus struct {
	Certificate []byte `json:"certificate"`
	Conditions  []struct {
		Type    string `json:"type"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"conditions"`
}

// Create submits a request named name.
func (c *CSRs) Create(ctx context.Context, name string, spec CSRSpec) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
		"metadata": map[string]string{"name": name}, "spec": spec,
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.host+csrPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "hpp-csi")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated {
		return &StatusError{Method: http.MethodPost, Path: csrPath, Status: resp.Status, Code: resp.StatusCode, Body: strings.TrimSpace(string(answer))}
	}
	return nil
}

// Status reads the answer to the request named name.
func (c *CSRs) Status(ctx context.Context, name string) (*CSRStatus, error) {
	var obj struct {
		Status CSRStatus `json:"status"`
	}
	if err := get(ctx, c.client, c.host, csrPath+"/"+name, &obj); err != nil {
		return nil, err
	}
	return &obj.Status, nil
}
