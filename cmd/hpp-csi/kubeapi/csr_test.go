package kubeapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// Create posts the request as the API expects it; Status reads the answer;
// a refusal names the method, the path and the API's reason.
func TestCSRs(t *testing.T) {
	var posted map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == csrPath:
			body, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(body, &posted); err != nil {
				t.Error(err)
			}
			if posted["metadata"].(map[string]any)["name"] == "taken" {
				http.Error(w, `{"reason":"AlreadyExists"}`, http.StatusConflict)
				return
			}
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodGet && r.URL.Path == csrPath+"/mine":
			_, _ = io.WriteString(w, `{"status":{"certificate":"Y2VydA==","conditions":[{"type":"Approved","reason":"PeerCertificateApproved"}]}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := NewCSRsForHost(srv.URL, srv.Client())
	ctx := context.Background()
	if err := c.Create(ctx, "mine", CSRSpec{Request: []byte("pem"), SignerName: contract.PeerSignerName, Usages: []string{"client auth"}}); err != nil {
		t.Fatal(err)
	}
	spec := posted["spec"].(map[string]any)
	if posted["kind"] != "CertificateSigningRequest" || spec["signerName"] != contract.PeerSignerName || spec["request"] != "cGVt" {
		t.Errorf("posted %v", posted)
	}
	st, err := c.Status(ctx, "mine")
	if err != nil || string(st.Certificate) != "cert" || len(st.Conditions) != 1 || st.Conditions[0].Type != "Approved" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	err = c.Create(ctx, "taken", CSRSpec{})
	if err == nil || !strings.HasPrefix(err.Error(), "POST "+csrPath+": 409") || !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatalf("Create of a taken name: %v", err)
	}
	if _, err := c.Status(ctx, "gone"); !IsNotFound(err) {
		t.Fatalf("Status of a missing request: %v; want NotFound", err)
	}
}
