package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hppwebhook "github.com/hostpath-provisioner/hpp/cmd/hpp-operator/webhook"
)

// The operator serves /metrics over TLS (self-signed, as upstream's) under
// the webhook's policy: with TLS_MIN_VERSION_OVERRIDE=VersionTLS13 a TLS
// 1.2 client is refused and a TLS 1.3 one reads the metrics.
func TestMetricsServeTLSUnderThePolicy(t *testing.T) {
	policy, err := hppwebhook.NewTLSPolicy("VersionTLS13", "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	o := &options{metricsAddress: addr, metricsSecure: true}
	srv, err := metricsserver.NewServer(metricsOptions(o, policy), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(t.Context()) }()

	get := func(v uint16) (string, error) {
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, MinVersion: v, MaxVersion: v}}} //nolint:gosec // a self-signed test server
		resp, err := c.Get("https://" + addr + "/metrics")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %s", resp.Status)
		}
		return string(b), err
	}
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		if body, err = get(tls.VersionTLS13); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(body, "# TYPE") {
		t.Fatalf("TLS 1.3 scrape: %v (body %.80q)", err, body)
	}
	if _, err := get(tls.VersionTLS12); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.2 scrape under a TLS 1.3 minimum: %v; want a protocol version alert", err)
	}
	// Go's TLS server answers a plain request with 400 and no metrics.
	if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP scrape of the TLS port: %s; want 400 Bad Request", resp.Status)
		}
	}
}
