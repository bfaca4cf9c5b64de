package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Errors a Fetch wraps, for the caller to turn into gRPC codes.
var (
	// ErrNotAuthorized: the source's node refused (403).
	ErrNotAuthorized = errors.New("not authorized")
	// ErrSourceNotFound: authorized, but the node does not hold the
	// source (404).
	ErrSourceNotFound = errors.New("source not found")
	// ErrUnavailable: no answer (dial, TLS handshake, connection), or the
	// node could not decide (503) or failed (5xx); worth retrying.
	ErrUnavailable = errors.New("peer unavailable")
	// ErrInvalid: the node found the request malformed (400).
	ErrInvalid = errors.New("invalid request")
)

// FetchError is a Fetch that got no stream.
type FetchError struct {
	// Kind is one of the Err* values above.
	Kind error
	Peer Peer
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Reason is the peer's reason (its answer's body), or the transport
	// error.
	Reason string
	Err    error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("node %s (%s): %v: %s", e.Peer.Node, e.Peer.Addr, e.Kind, e.Reason)
}

func (e *FetchError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Peer is the node a Fetch asks: its name, which its certificate must
// carry, and the address (host:port) of its peer transport.
type Peer struct {
	Node string
	Addr string
}

// Client fetches sources from other nodes with this node's certificate.
type Client struct {
	Creds *Credentials
	// ResponseHeaderTimeout bounds the wait for the answer (authorization
	// and opening the source); zero means a minute. The stream itself is
	// bounded only by ctx.
	ResponseHeaderTimeout time.Duration
}

// Fetch asks p for the source (kind, id) on behalf of the claim
// namespace/claim and returns the stream. The caller closes it. Each Fetch
// makes its own connection with the credentials of the moment (a clone is
// one long stream, there is nothing to pool), closed with the stream. A
// stream that breaks off reads an error, never a clean short end. The
// stream is a *Stream, which carries what the server said of its size.
func (c *Client) Fetch(ctx context.Context, p Peer, kind Kind, id, namespace, claim string) (io.ReadCloser, error) {
	return c.FetchIfChanged(ctx, p, kind, id, namespace, claim, "")
}

// FetchIfChanged is Fetch for a requester that holds a copy of the source
// at generation cached (CachedGenerationHeader; "" is Fetch): when the
// source is still at that generation the answer is a *Stream with
// NotModified set and nothing to read. Otherwise it is Fetch's stream,
// whose Generation is the source's as the server opened it.
func (c *Client) FetchIfChanged(ctx context.Context, p Peer, kind Kind, id, namespace, claim, cached string) (io.ReadCloser, error) {
	cert, pool, err := c.Creds.current()
	if err != nil {
		// This node's own certificate is missing (still being issued):
		// retried like a peer that cannot be reached.
		return nil, &FetchError{Kind: ErrUnavailable, Peer: p, Reason: "this node has no usable peer certificate: " + err.Error(), Err: err}
	}
	wait := c.ResponseHeaderTimeout
	if wait == 0 {
		wait = time.Minute
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS13,
			RootCAs:    pool,
			// The name checked in the server's certificate; the
			// address dialled may be an IP.
			ServerName: p.Node,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cert, nil
			},
		},
		ForceAttemptHTTP2:     true,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: wait,
		DisableCompression:    true, // the stream is passed through as it is
	}
	u := url.URL{Scheme: "https", Host: p.Addr,
		Path:     "/v1/sources/" + url.PathEscape(string(kind)) + "/" + url.PathEscape(id),
		RawQuery: url.Values{"namespace": {namespace}, "claim": {claim}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	req.Header.Set("User-Agent", "hpp-csi")
	if cached != "" {
		req.Header.Set(CachedGenerationHeader, cached)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, &FetchError{Kind: ErrUnavailable, Peer: p, Reason: err.Error(), Err: err}
	}
	if resp.StatusCode == http.StatusNotModified && cached != "" {
		return &Stream{ReadCloser: resp.Body, tr: tr, NotModified: true, Generation: resp.Header.Get(GenerationHeader)}, nil
	}
	if resp.StatusCode == http.StatusOK {
		st := &Stream{ReadCloser: resp.Body, tr: tr, Generation: resp.Header.Get(GenerationHeader)}
		if n, err := strconv.ParseInt(resp.Header.Get(AllocatedHeader), 10, 64); err == nil && n > 0 {
			st.AllocatedBytes = n
		}
		return st, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	tr.CloseIdleConnections()
	e := &FetchError{Peer: p, Status: resp.StatusCode, Reason: strings.TrimSpace(string(body))}
	switch resp.StatusCode {
	case http.StatusForbidden:
		e.Kind = ErrNotAuthorized
	case http.StatusNotFound:
		e.Kind = ErrSourceNotFound
	case http.StatusBadRequest:
		e.Kind = ErrInvalid
	default:
		e.Kind = ErrUnavailable
		if e.Reason == "" {
			e.Reason = resp.Status
		}
	}
	return nil, e
}

// Stream is a fetched source: the answer's body, which closes its
// connection with it.
type Stream struct {
	io.ReadCloser
	// AllocatedBytes is the server's AllocatedHeader; 0 when it sent none.
	AllocatedBytes int64
	// Generation is the server's GenerationHeader; "" when it sent none.
	Generation string
	// NotModified: the source is at the generation the request named
	// (FetchIfChanged); there is nothing to read.
	NotModified bool
	tr          *http.Transport
}

func (s *Stream) Close() error {
	err := s.ReadCloser.Close()
	s.tr.CloseIdleConnections()
	return err
}
