package csinode

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hostpath-provisioner/hpp/test/csitest"
)

// httpGet fetches path from the driver's health or metrics server.
func httpGet(t *testing.T, d *csitest.Driver, what, path string) (int, string) {
	t.Helper()
	addr, err := d.HTTPAddress(what)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
