package peer

import (
	"errors"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// sentBytes is hpp_peer_sent_bytes_total of kind.
func (e *env) sentBytes(t *testing.T, kind Kind) float64 {
	t.Helper()
	return e.counter(t, "hpp_peer_sent_bytes_total", "kind", string(kind))
}

// requests is hpp_peer_requests_total of result.
func (e *env) requests(t *testing.T, result string) float64 {
	t.Helper()
	return e.counter(t, "hpp_peer_requests_total", "result", result)
}

func (e *env) counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// The sender counts the bytes it sent and each answer by result: a whole
// stream is its bytes and "served", a refusal and a source not here send
// nothing, a stream that breaks counts what left before the break and
// "failed".
func TestMetricsCountSentBytesAndResults(t *testing.T) {
	e := start(t)
	c := e.client(t, "node-b")
	// Every result is there before the first request, at 0.
	if n := promtest.CollectAndCount(e.reg, "hpp_peer_requests_total"); n != 6 {
		t.Fatalf("%d hpp_peer_requests_total series before any request, want 6 (one per result)", n)
	}
	if _, err := fetchAll(t, c, e.nodeA(), KindVolume, "vol-1", "clone-b"); err != nil {
		t.Fatal(err)
	}
	if got := e.sentBytes(t, KindVolume); got != float64(len(volumeData)) {
		t.Fatalf("sent %v bytes for a %d-byte stream", got, len(volumeData))
	}
	if _, err := fetchAll(t, c, e.nodeA(), KindSnapshot, "snap-1", "restore-b"); err != nil {
		t.Fatal(err)
	}
	if got := e.sentBytes(t, KindSnapshot); got != float64(len(snapshotData)) {
		t.Fatalf("sent %v snapshot bytes, want %d", got, len(snapshotData))
	}
	if got := e.requests(t, ResultServed); got != 2 {
		t.Fatalf("served %v, want 2", got)
	}

	_, err := fetchAll(t, c, e.nodeA(), KindVolume, "vol-1", "clone-c")
	if !errors.Is(err, ErrNotAuthorized) {
		t.Fatalf("got %v, want a refusal", err)
	}
	_, err = fetchAll(t, c, e.nodeA(), KindVolume, "vol-3", "clone3-b")
	if !errors.Is(err, ErrSourceNotFound) {
		t.Fatalf("got %v, want not found", err)
	}
	if r, nf := e.requests(t, ResultRefused), e.requests(t, ResultNotFound); r != 1 || nf != 1 {
		t.Fatalf("refused %v, not found %v; want 1 each", r, nf)
	}
	if got := e.sentBytes(t, KindVolume); got != float64(len(volumeData)) {
		t.Fatalf("sent %v bytes after a refusal and a 404, want still %d", got, len(volumeData))
	}

	e.source.mu.Lock()
	e.source.failAfter = 70000
	e.source.mu.Unlock()
	if _, err := fetchAll(t, c, e.nodeA(), KindVolume, "vol-1", "clone-b"); err == nil {
		t.Fatal("a broken stream read cleanly")
	}
	if got := e.requests(t, ResultFailed); got != 1 {
		t.Fatalf("failed %v, want 1", got)
	}
	if got := e.sentBytes(t, KindVolume) - float64(len(volumeData)); got != 70000 {
		t.Fatalf("sent %v bytes of a stream that broke after 70000", got)
	}
}
