package testutil

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// HTTPGetOK fetches url with http.DefaultClient and returns its body. An
// answer other than 200 OK is an error that carries the status and the
// body, which usually says why. It needs nothing but the standard library,
// so that the in-cluster test image (test/images/incluster) can use it too.
func HTTPGetOK(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s: %s", resp.Status, body)
	}
	return string(body), nil
}
