package peer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/kubeapi/kubeapitest"
	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/testutil"
)

const ns = "ns"

// apiObjects are the fake API server's objects, by path. The node serving
// is node-a; the clones are made on node-b.
func apiObjects() map[string]string {
	claim := func(name, uid, selected, volumeName, source string) string {
		return kubeapitest.Claim(ns, name, uid, selected, volumeName, source)
	}
	pvcSource := kubeapitest.PVCSource
	pv := func(name, claimName, claimUID, driver, handle string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"claimRef":{"namespace":%q,"name":%q,"uid":%q},"csi":{"driver":%q,"volumeHandle":%q}}}`,
			name, ns, claimName, claimUID, driver, handle)
	}
	snapSource := `,"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"snap"},` +
		`"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"snap"}`
	claims := kubeapitest.ClaimsPath(ns)
	pvs := kubeapitest.PVsPath
	snaps := "/apis/snapshot.storage.k8s.io/v1/"
	return map[string]string{
		// Sources: claims bound to PVs of this driver.
		claims + "src":    claim("src", "uid-src", "node-a", "pv-src", ""),
		pvs + "pv-src":    pv("pv-src", "src", "uid-src", contract.DriverName, "vol-1"),
		claims + "src2":   claim("src2", "uid-src2", "node-a", "pv-src2", ""),
		pvs + "pv-src2":   pv("pv-src2", "src2", "uid-src2", contract.DriverName, "vol-2"),
		claims + "src3":   claim("src3", "uid-src3", "node-a", "pv-src3", ""),
		pvs + "pv-src3":   pv("pv-src3", "src3", "uid-src3", contract.DriverName, "vol-3"),
		claims + "stolen": claim("stolen", "uid-stolen", "node-a", "pv-src", ""), // names pv-src, which is src's
		claims + "other":  claim("other", "uid-other", "node-a", "pv-other", ""),
		pvs + "pv-other":  pv("pv-other", "other", "uid-other", "another.csi.driver", "vol-1"),
		snaps + "namespaces/" + ns + "/volumesnapshots/snap": `{"metadata":{"namespace":"ns","name":"snap","uid":"uid-snap"},` +
			`"status":{"boundVolumeSnapshotContentName":"content-1"}}`,
		snaps + "volumesnapshotcontents/content-1": fmt.Sprintf(`{"metadata":{"name":"content-1"},"spec":{"driver":%q,`+
			`"volumeSnapshotRef":{"namespace":"ns","name":"snap","uid":"uid-snap"}},"status":{"snapshotHandle":"snap-1"}}`, contract.DriverName),
		// The claims being created.
		claims + "clone-b":        claim("clone-b", "u1", "node-b", "", pvcSource("src")),
		claims + "restore-b":      claim("restore-b", "u2", "node-b", "", snapSource),
		claims + "clone-c":        claim("clone-c", "u3", "node-c", "", pvcSource("src")),
		claims + "clone2-b":       claim("clone2-b", "u4", "node-b", "", pvcSource("src2")),
		claims + "clone3-b":       claim("clone3-b", "u5", "node-b", "", pvcSource("src3")),
		claims + "immediate":      claim("immediate", "u6", "", "", pvcSource("src")),
		claims + "bound-b":        claim("bound-b", "u7", "node-b", "pv-done", pvcSource("src")),
		claims + "plain-b":        claim("plain-b", "u8", "node-b", "", ""),
		claims + "stolen-b":       claim("stolen-b", "u9", "node-b", "", pvcSource("stolen")),
		claims + "other-b":        claim("other-b", "u10", "node-b", "", pvcSource("other")),
		claims + "missingsrc-b":   claim("missingsrc-b", "u11", "node-b", "", pvcSource("nosuch")),
		claims + "crossns-b":      claim("crossns-b", "u12", "node-b", "", `,"dataSourceRef":{"kind":"PersistentVolumeClaim","name":"src","namespace":"elsewhere"}`),
		claims + "snapasvolume-b": claim("snapasvolume-b", "u13", "node-b", "", snapSource),
	}
}

// fakeAPI serves apiObjects; the claim "apidown" answers 500.
func fakeAPI(t *testing.T) *kubeapi.Sources {
	t.Helper()
	srv := kubeapitest.Server(t, apiObjects(), func(r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("API %s %s: the check only reads", r.Method, r.URL.Path)
		}
	})
	return kubeapi.NewSourcesForHost(srv.URL, srv.Client())
}

// fakeSource holds node-a's sources and records every Open.
type fakeSource struct {
	mu    sync.Mutex
	data  map[string][]byte
	opens []string
	// failAfter, when set, makes the reader fail after that many bytes.
	failAfter int
}

func (f *fakeSource) Open(_ context.Context, kind Kind, id string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens = append(f.opens, string(kind)+"/"+id)
	data, ok := f.data[string(kind)+"/"+id]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", kind, id, ErrNotFound)
	}
	if f.failAfter > 0 {
		return io.NopCloser(io.MultiReader(bytes.NewReader(data[:f.failAfter]), errReader{})), nil
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (f *fakeSource) openCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.opens)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// env is node-a serving, with what a test looks at.
type env struct {
	ca     *testutil.TestCA
	addr   string
	dir    string // node-a's credentials
	source *fakeSource
	logs   *observer.ObservedLogs
	// reg holds the server's metrics.
	reg *prometheus.Registry
}

var (
	volumeData   = bytes.Repeat([]byte("volume tree "), 100000) // 1.2 MB: several HTTP/2 frames
	snapshotData = []byte("snapshot tree")
)

func start(t *testing.T) *env { return startWith(t, nil) }

// startWith is start with the Source wrap makes of the fake (nil: the
// fake itself).
func startWith(t *testing.T, wrap func(*fakeSource) Source) *env {
	t.Helper()
	ca := newCA(t, "hpp peer CA")
	creds, dir := nodeCreds(t, ca, "node-a")
	core, logs := observer.New(zap.DebugLevel)
	e := &env{ca: ca, dir: dir, logs: logs,
		source: &fakeSource{data: map[string][]byte{"volume/vol-1": volumeData, "volume/vol-2": []byte("two"), "snapshot/snap-1": snapshotData}}}
	var src Source = e.source
	if wrap != nil {
		src = wrap(e.source)
	}
	e.reg = prometheus.NewRegistry()
	metrics, err := NewMetrics(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Node: "node-a", Creds: creds, Auth: NewClaimCheck(fakeAPI(t), ""), Source: src, Log: zap.New(core), Metrics: metrics}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// client is a node's client with a certificate for node from ca.
func (e *env) client(t *testing.T, node string) *Client {
	t.Helper()
	creds, _ := nodeCreds(t, e.ca, node)
	return &Client{Creds: creds}
}

func (e *env) nodeA() Peer { return Peer{Node: "node-a", Addr: e.addr} }

func fetchAll(t *testing.T, c *Client, p Peer, kind Kind, id, claim string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := c.Fetch(ctx, p, kind, id, ns, claim)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}

// wantFetched: node-b fetches the source from node-a for claim and reads
// want.
func (e *env) wantFetched(t *testing.T, kind Kind, id, claim string, want []byte) {
	t.Helper()
	got, err := fetchAll(t, e.client(t, "node-b"), e.nodeA(), kind, id, claim)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want the source's %d", len(got), len(want))
	}
}

func TestVolumeClone(t *testing.T) {
	e := start(t)
	e.wantFetched(t, KindVolume, "vol-1", "clone-b", volumeData)
	streamed := e.logs.FilterMessage("streaming source to peer").All()
	if len(streamed) != 1 || streamed[0].ContextMap()["requester"] != "node-b" || streamed[0].ContextMap()["protocol"] != "HTTP/2.0" {
		t.Errorf("log: %+v, want one stream to node-b over HTTP/2", streamed)
	}
}

func TestSnapshotRestore(t *testing.T) {
	start(t).wantFetched(t, KindSnapshot, "snap-1", "restore-b", snapshotData)
}

// Each refusal: the error the client gets, the reason in it, and a log
// line with the requester, the claim and the reason; the source is never
// opened.
func TestRefusals(t *testing.T) {
	e := start(t)
	c := e.client(t, "node-b")
	for _, tc := range []struct {
		name      string
		kind      Kind
		id, claim string
		want      error
		status    int
		reasonHas string
	}{
		{"claim selected another node", KindVolume, "vol-1", "clone-c", ErrNotAuthorized, 403, `selected node "node-c", not the requester "node-b"`},
		{"claim's source is another volume", KindVolume, "vol-1", "clone2-b", ErrNotAuthorized, 403, `is volume "vol-2", not "vol-1"`},
		{"claim missing", KindVolume, "vol-1", "nosuch", ErrNotAuthorized, 403, "claim ns/nosuch does not exist"},
		{"claim without selected node", KindVolume, "vol-1", "immediate", ErrNotAuthorized, 403, "has no " + contract.AnnSelectedNode + " annotation"},
		{"claim already bound", KindVolume, "vol-1", "bound-b", ErrNotAuthorized, 403, "already bound"},
		{"claim without data source", KindVolume, "vol-1", "plain-b", ErrNotAuthorized, 403, "has no data source"},
		{"source claim names a PV bound to another claim", KindVolume, "vol-1", "stolen-b", ErrNotAuthorized, 403, "is not bound to data source claim ns/stolen"},
		{"source PV of another driver", KindVolume, "vol-1", "other-b", ErrNotAuthorized, 403, "is not a volume of " + contract.DriverName},
		{"source claim missing", KindVolume, "vol-1", "missingsrc-b", ErrNotAuthorized, 403, "data source claim ns/nosuch does not exist"},
		{"cross-namespace source", KindVolume, "vol-1", "crossns-b", ErrNotAuthorized, 403, "cross-namespace"},
		{"volume asked, snapshot named", KindVolume, "snap-1", "snapasvolume-b", ErrNotAuthorized, 403, "not a PersistentVolumeClaim"},
		{"snapshot asked, volume named", KindSnapshot, "vol-1", "clone-b", ErrNotAuthorized, 403, "not a VolumeSnapshot"},
		{"snapshot asked, other handle", KindSnapshot, "snap-2", "restore-b", ErrNotAuthorized, 403, `is snapshot "snap-1", not "snap-2"`},
		{"bad kind", "disk", "vol-1", "clone-b", ErrInvalid, 400, "kind: "},
		{"bad id", KindVolume, ".hpp-staging", "clone-b", ErrInvalid, 400, "id: "},
		{"bad claim", KindVolume, "vol-1", "Clone_B", ErrInvalid, 400, "claim: "},
		{"API server failing", KindVolume, "vol-1", "apidown", ErrUnavailable, 503, "cannot check authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.logs.TakeAll()
			_, err := fetchAll(t, c, e.nodeA(), tc.kind, tc.id, tc.claim)
			var fe *FetchError
			if !errors.Is(err, tc.want) || !errors.As(err, &fe) || fe.Status != tc.status || !strings.Contains(fe.Reason, tc.reasonHas) {
				t.Fatalf("got %v, want %v (%d) with %q", err, tc.want, tc.status, tc.reasonHas)
			}
			logs := e.logs.FilterMessage("peer request refused").All()
			if len(logs) != 1 {
				t.Fatalf("%d refusals logged, want 1", len(logs))
			}
			f := logs[0].ContextMap()
			if f["requester"] != "node-b" || f["claim"] != ns+"/"+tc.claim || f["reason"] != fe.Reason {
				t.Errorf("logged %v, want requester node-b, claim %s/%s and reason %q", f, ns, tc.claim, fe.Reason)
			}
			if n := e.source.openCount(); n != 0 {
				t.Errorf("the source was opened %d times for a refused request", n)
			}
		})
	}
}

// Authorized, but this node does not hold the source: 404.
func TestSourceNotHere(t *testing.T) {
	e := start(t)
	_, err := fetchAll(t, e.client(t, "node-b"), e.nodeA(), KindVolume, "vol-3", "clone3-b")
	if !errors.Is(err, ErrSourceNotFound) {
		t.Fatalf("got %v, want ErrSourceNotFound", err)
	}
}

// A source that fails mid-stream: the client reads an error, not a short
// clean end.
func TestStreamBreaksOff(t *testing.T) {
	e := start(t)
	e.source.mu.Lock()
	e.source.failAfter = 70000
	e.source.mu.Unlock()
	got, err := fetchAll(t, e.client(t, "node-b"), e.nodeA(), KindVolume, "vol-1", "clone-b")
	if err == nil {
		t.Fatalf("read %d bytes and a clean end, want an error", len(got))
	}
}

// A certificate from another CA, or none: refused at the handshake, the
// source never opened.
func TestHandshakeRefusals(t *testing.T) {
	e := start(t)
	other := newCA(t, "another CA")
	// Trusts node-a's CA (so it would accept the server), but its own
	// certificate is the other CA's.
	dir := t.TempDir()
	writeCreds(t, dir, other, e.ca.PEM, "node-b")
	creds, err := LoadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetchAll(t, &Client{Creds: creds}, e.nodeA(), KindVolume, "vol-1", "clone-b")
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("another CA: got %v, want ErrUnavailable (refused at the handshake)", err)
	}

	_, pool, _ := e.client(t, "node-b").Creds.current()
	noCert := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "node-a", MinVersion: tls.VersionTLS13}}}
	resp, err := noCert.Get("https://" + e.addr + "/v1/sources/volume/vol-1?namespace=ns&claim=clone-b")
	if err == nil {
		_ = resp.Body.Close()
		t.Errorf("no client certificate: got %s, want a refused handshake", resp.Status)
	}

	// The server's certificate does not name the node the client meant.
	_, err = fetchAll(t, e.client(t, "node-b"), Peer{Node: "node-z", Addr: e.addr}, KindVolume, "vol-1", "clone-b")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "node-z") {
		t.Errorf("server certificate for another node: got %v, want ErrUnavailable naming node-z", err)
	}

	if n := e.source.openCount(); n != 0 {
		t.Errorf("the source was opened %d times", n)
	}
	// The server's error log reports the refused handshakes.
	deadline := time.Now().Add(5 * time.Second)
	for len(e.logs.FilterMessageSnippet("TLS handshake error").All()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(e.logs.FilterMessageSnippet("TLS handshake error").All()); n < 2 {
		t.Errorf("%d refused handshakes logged, want 2 at least", n)
	}
}

// A verified certificate must name one node.
func TestCertificateWithoutOneNode(t *testing.T) {
	e := start(t)
	for _, names := range [][]string{nil, {"node-b", "node-c"}} {
		dir := t.TempDir()
		writeCreds(t, dir, e.ca, e.ca.PEM, names...)
		creds, err := LoadCredentials(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fetchAll(t, &Client{Creds: creds}, e.nodeA(), KindVolume, "vol-1", "clone-b")
		var fe *FetchError
		if !errors.Is(err, ErrNotAuthorized) || !errors.As(err, &fe) || !strings.Contains(fe.Reason, "exactly one") {
			t.Errorf("certificate naming %v: got %v, want ErrNotAuthorized (exactly one DNS name)", names, err)
		}
	}
}

// Rotation: replaced files are used by the next connection, on both ends.
func TestRotation(t *testing.T) {
	e := start(t)
	// The client: a certificate for node-x is refused for node-b's claim;
	// once the files are replaced by node-b's, the next fetch is served.
	dir := t.TempDir()
	writeCreds(t, dir, e.ca, e.ca.PEM, "node-x")
	creds, err := LoadCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Creds: creds}
	if _, err := fetchAll(t, c, e.nodeA(), KindSnapshot, "snap-1", "restore-b"); !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("as node-x: got %v, want ErrNotAuthorized", err)
	}
	writeCreds(t, dir, e.ca, e.ca.PEM, "node-b")
	if got, err := fetchAll(t, c, e.nodeA(), KindSnapshot, "snap-1", "restore-b"); err != nil || !bytes.Equal(got, snapshotData) {
		t.Fatalf("after rotation to node-b: %q, %v", got, err)
	}

	// The server: a new connection is served the new certificate.
	serverSerial := func() string {
		t.Helper()
		cert, pool, err := c.Creds.current()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: pool, ServerName: "node-a", MinVersion: tls.VersionTLS13,
			Certificates: []tls.Certificate{*cert}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serverSerial()
	want := writeCreds(t, e.dir, e.ca, e.ca.PEM, "node-a").String()
	if after := serverSerial(); after == before || after != want {
		t.Errorf("server certificate serial %s after rotation (was %s), want the new one %s", after, before, want)
	}

	// A rotation that leaves an unusable set (a key that does not match)
	// keeps the last good one.
	other := newCA(t, "x")
	_, strayKey, _ := other.Issue(t, "node-a")
	if err := os.WriteFile(filepath.Join(e.dir, keyFile), strayKey, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := serverSerial(); got != want {
		t.Errorf("half-rotated: served %s, want the last good %s", got, want)
	}
}

// Other paths and methods are refused and logged too.
func TestOtherEndpoints(t *testing.T) {
	e := start(t)
	cert, pool, err := e.client(t, "node-b").Creds.current()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool,
		ServerName: "node-a", MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*cert}}}}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/sources"},
		{http.MethodDelete, "/v1/sources/volume/vol-1?namespace=ns&claim=clone-b"},
	} {
		req, err := http.NewRequest(tc.method, "https://"+e.addr+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %s, want 404", tc.method, tc.path, resp.Status)
		}
	}
	logs := e.logs.FilterMessage("peer request refused").All()
	if len(logs) != 2 || logs[0].ContextMap()["requester"] != "node-b" {
		t.Errorf("logged %+v, want 2 refusals of node-b", logs)
	}
	if n := e.source.openCount(); n != 0 {
		t.Errorf("the source was opened %d times", n)
	}
}
