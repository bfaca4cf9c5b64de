package peer

import (
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// The sender's side of the transport in figures: what left this node, and
// how requests were answered. The receiver counts what arrived
// (hpp_pool_remote_copy_received_bytes_total); the two together tell a
// transfer cut on the way from one never sent, and the sender's bytes are
// the proof that a clone served from the requester's cache sent nothing.

// Request results, the values of the result label.
const (
	// ResultServed: the stream was sent whole (200).
	ResultServed = "served"
	// ResultNotModified: the requester's cached copy is current (304);
	// nothing of the source was sent.
	ResultNotModified = "not_modified"
	// ResultRefused: not authorized, or malformed (403, 400, an unknown
	// endpoint); nothing of the source was read.
	ResultRefused = "refused"
	// ResultNotFound: authorized, but this node does not hold the source.
	ResultNotFound = "not_found"
	// ResultUnavailable: authorization could not be decided (503).
	ResultUnavailable = "unavailable"
	// ResultFailed: the source could not be opened (500), or the stream
	// broke after the 200 (aborted: the requester sees a failed read).
	ResultFailed = "failed"
)

// Metrics are the server's counters; a nil *Metrics counts nothing.
type Metrics struct {
	sent     *prometheus.CounterVec
	requests *prometheus.CounterVec
}

// NewMetrics registers the server's counters in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hpp_peer_sent_bytes_total",
			Help: "Bytes of treecopy stream sent to other nodes for their clones and restores (response bodies, counted as written, aborted streams included).",
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hpp_peer_requests_total",
			Help: "Requests of other nodes for a source's data, by result (served, not_modified, refused, not_found, unavailable, failed).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.sent, m.requests} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every result shows from the start, at 0: a dashboard or a test
	// reading "refused" must not find it missing before the first one.
	for _, r := range []string{ResultServed, ResultNotModified, ResultRefused, ResultNotFound, ResultUnavailable, ResultFailed} {
		m.requests.WithLabelValues(r)
	}
	for _, k := range []Kind{KindVolume, KindSnapshot} {
		m.sent.WithLabelValues(string(k))
	}
	return m, nil
}

func (m *Metrics) result(r string) {
	if m != nil {
		m.requests.WithLabelValues(r).Inc()
	}
}

// resultOfStatus is the result of a refusal answered with code.
func resultOfStatus(code int) string {
	switch code {
	case http.StatusNotFound:
		return ResultNotFound
	case http.StatusServiceUnavailable:
		return ResultUnavailable
	case http.StatusInternalServerError:
		return ResultFailed
	}
	return ResultRefused
}

// body is the response body's writer, counting what is written as it
// goes: a stream aborted half way still sent what it sent.
func (m *Metrics) body(w io.Writer, kind Kind) io.Writer {
	if m == nil {
		return w
	}
	return &countingWriter{w: w, c: m.sent.WithLabelValues(string(kind))}
}

type countingWriter struct {
	w io.Writer
	c prometheus.Counter
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		c.c.Add(float64(n))
	}
	return n, err
}
