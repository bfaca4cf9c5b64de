// Package kubeapitest is a fake API server for the tests of what reads the
// API (kubeapi's own readers, the peer transport's claim check, the remote
// resolver): objects by path, and builders of the claims they hold.
//
// It does not import kubeapi, so that kubeapi's own tests can use it
// without an import cycle: a test makes its client over Server's URL, as
// kubeapi.NewSourcesForHost(srv.URL, srv.Client()).
package kubeapitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/contract"
)

// ClaimsPath is the API path of namespace ns's claims, "/" ended.
func ClaimsPath(ns string) string { return "/api/v1/namespaces/" + ns + "/persistentvolumeclaims/" }

// PVsPath is the API path of PersistentVolumes, "/" ended.
const PVsPath = "/api/v1/persistentvolumes/"

// Claim is a claim's JSON: selected is its selected-node annotation ("":
// none), volumeName its bound PV ("": unbound), source the JSON fields of
// its data source with a leading comma (PVCSource) or "".
func Claim(ns, name, uid, selected, volumeName, source string) string {
	ann := "{}"
	if selected != "" {
		ann = fmt.Sprintf(`{%q:%q}`, contract.AnnSelectedNode, selected)
	}
	return fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q,"uid":%q,"annotations":%s},"spec":{"volumeName":%q%s}}`,
		ns, name, uid, ann, volumeName, source)
}

// PVCSource is a claim's dataSource naming the claim name, for Claim.
func PVCSource(name string) string {
	return fmt.Sprintf(`,"dataSource":{"kind":"PersistentVolumeClaim","name":%q}`, name)
}

// Server answers GETs of objects by path (404 NotFound for others, as the
// API server answers a missing object); a path ending in "/apidown"
// answers 500. check, when set, sees every request first. The server stops
// when the test ends.
func Server(t *testing.T, objects map[string]string, check func(*http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			check(r)
		}
		if strings.HasSuffix(r.URL.Path, "/apidown") {
			http.Error(w, `{"reason":"InternalError"}`, http.StatusInternalServerError)
			return
		}
		body, ok := objects[r.URL.Path]
		if !ok {
			http.Error(w, `{"reason":"NotFound"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}
