package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/internal/pool"
)

// Kind is what a request streams: a volume's tree or a snapshot's.
type Kind string

const (
	KindVolume   Kind = "volume"
	KindSnapshot Kind = "snapshot"
)

// Path is the request's path pattern.
const Path = "/v1/sources/{kind}/{id}"

// Request is an authenticated request: Node is the requester, taken from
// its verified certificate; the rest from the URL.
type Request struct {
	Node      string
	Kind      Kind
	ID        string
	Namespace string
	Claim     string
	// CachedGeneration is CachedGenerationHeader, "" when not sent.
	CachedGeneration string
}

// AllocatedHeader is the response header that carries, in decimal, the
// bytes the source's tree holds (data, not holes): the size of the
// transfer, as far as the sender knows it. Sent when the Source's reader
// has an AllocatedBytes() int64 method.
const AllocatedHeader = "Hpp-Allocated-Bytes"

// Sized is what a Source's reader implements to have AllocatedHeader sent.
type Sized interface {
	AllocatedBytes() int64
}

// GenerationHeader is the response header that carries the source's
// generation, as the Source opened it: a token that changes whenever the
// source may have changed, GenerationLive for a source that may be
// changing now (never to be cached), absent when the Source does not
// know. Sent when the Source's reader has a Generation() string method.
const GenerationHeader = "Hpp-Generation"

// CachedGenerationHeader is the request header that names the generation
// of the source the requester holds a copy of. When the source is still at
// that generation the answer is 304 Not Modified, with no body (and
// GenerationHeader), when the Source implements Generations.
const CachedGenerationHeader = "Hpp-Cached-Generation"

// GenerationLive is the generation of a source that may be changing now.
const GenerationLive = "live"

// Generationed is what a Source's reader implements to have
// GenerationHeader sent.
type Generationed interface {
	Generation() string
}

// Generations is what a Source implements to answer CachedGenerationHeader
// without opening the source: its generation now ("" when unknown; errors
// as Open's).
type Generations interface {
	Generation(ctx context.Context, kind Kind, id string) (string, error)
}

// cacheable reports whether gen may be matched by a requester's copy.
func cacheable(gen string) bool { return gen != "" && gen != GenerationLive }

// validGeneration checks the form of a generation token: short, and only
// letters, digits, '.', '_' and '-'.
func validGeneration(g string) error {
	if len(g) > 128 {
		return fmt.Errorf("%d bytes long; at most 128 are allowed", len(g))
	}
	if strings.Trim(g, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("%q is not a generation token", g)
	}
	return nil
}

// ErrNotFound is what a Source wraps when it does not hold the source
// (fs.ErrNotExist is understood too).
var ErrNotFound = errors.New("not on this node")

// Source opens what a request streams. The real one encodes the tree with
// internal/treecopy into a pipe; the reader's error, if the encoding
// fails, aborts the stream. Open is called only for authorized requests.
type Source interface {
	Open(ctx context.Context, kind Kind, id string) (io.ReadCloser, error)
}

// Refusal is an Authorizer's "no" (403), with the reason the requester
// gets and the log records. Any other Authorizer error means the decision
// could not be made (503).
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "not authorized: " + r.Reason }

func refuse(format string, args ...any) error {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// Authorizer decides whether r.Node may read the source: nil, a *Refusal,
// or another error when it cannot tell.
type Authorizer interface {
	Authorize(ctx context.Context, r Request) error
}

// Server serves a node's sources to its peers.
type Server struct {
	// Node is this node's name (for logs).
	Node   string
	Creds  *Credentials
	Auth   Authorizer
	Source Source
	Log    *zap.Logger
	// Metrics, when set, counts bytes sent and requests by result.
	Metrics *Metrics
}

// TLSConfig is the server side of the mutual TLS: TLS 1.3, a client
// certificate required and verified against the CA, both taken from Creds
// at each handshake.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, err := s.Creds.current()
			if err != nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    pool,
				NextProtos:   []string{"h2", "http/1.1"},
			}, nil
		},
	}
}

// Handler serves the one request. Requests that did not come over the
// mutual TLS of TLSConfig (no verified client certificate) are refused.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path, s.serveSource)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		node, err := requester(r)
		if err != nil {
			node = "(unverified)"
		}
		s.refused(w, Request{Node: node}, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// requester is the node named by the request's verified client
// certificate.
func requester(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", errors.New("no verified client certificate")
	}
	return nodeOf(r.TLS.VerifiedChains[0][0])
}

// Serve serves on lis until ctx ends. Streams in flight when it ends are
// cut: a clone is retried by its CreateVolume.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	// TLS handshakes refused (no certificate, another CA) are reported
	// through ErrorLog, with the remote address.
	errorLog, err := zap.NewStdLogAt(s.Log.With(zap.String("what", "peer transport")), zap.WarnLevel)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         s.TLSConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: a stream lasts as long as the tree takes.
		ErrorLog: errorLog,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	s.Log.Info("serving peer transport", zap.String("address", lis.Addr().String()), zap.String("node", s.Node))
	if err := srv.ServeTLS(lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("peer transport: %w", err)
	}
	return nil
}

// badRequest is a 400 naming the field.
type badRequest struct{ field, why string }

func (b badRequest) Error() string { return b.field + ": " + b.why }

func parseRequest(r *http.Request) (Request, error) {
	req := Request{Kind: Kind(r.PathValue("kind")), ID: r.PathValue("id"),
		Namespace: r.URL.Query().Get("namespace"), Claim: r.URL.Query().Get("claim")}
	if req.Kind != KindVolume && req.Kind != KindSnapshot {
		return req, badRequest{"kind", fmt.Sprintf("%q is not %q or %q", req.Kind, KindVolume, KindSnapshot)}
	}
	if err := pool.ValidateID(req.ID); err != nil {
		return req, badRequest{"id", err.Error()}
	}
	if err := objectName(req.Namespace, 63); err != nil {
		return req, badRequest{"namespace", err.Error()}
	}
	if err := objectName(req.Claim, 253); err != nil {
		return req, badRequest{"claim", err.Error()}
	}
	req.CachedGeneration = r.Header.Get(CachedGenerationHeader)
	if err := validGeneration(req.CachedGeneration); err != nil {
		return req, badRequest{CachedGenerationHeader, err.Error()}
	}
	return req, nil
}

// objectName checks the form of a Kubernetes object name (lower-case
// letters, digits, '-' and '.'): enough to keep anything else out of the
// API paths and the logs.
func objectName(s string, maxLen int) error {
	if s == "" {
		return errors.New("required")
	}
	if len(s) > maxLen {
		return fmt.Errorf("%d bytes long; at most %d are allowed", len(s), maxLen)
	}
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" || strings.Contains(s, "..") || s[0] == '.' {
		return fmt.Errorf("%q is not a Kubernetes object name", s)
	}
	return nil
}

func (s *Server) serveSource(w http.ResponseWriter, r *http.Request) {
	req, err := parseRequest(r)
	node, nerr := requester(r)
	req.Node = node
	if nerr != nil {
		s.refused(w, req, http.StatusForbidden, nerr.Error())
		return
	}
	if err != nil {
		s.refused(w, req, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.Auth.Authorize(r.Context(), req); err != nil {
		var no *Refusal
		if errors.As(err, &no) {
			s.refused(w, req, http.StatusForbidden, no.Reason)
		} else {
			s.refused(w, req, http.StatusServiceUnavailable, "cannot check authorization: "+err.Error())
		}
		return
	}
	if gens, ok := s.Source.(Generations); ok && req.CachedGeneration != "" {
		gen, err := gens.Generation(r.Context(), req.Kind, req.ID)
		if err != nil {
			s.openFailed(w, req, err)
			return
		}
		if cacheable(gen) && gen == req.CachedGeneration {
			s.Log.Info("source unchanged since the peer's copy; nothing sent", append(s.fields(req), zap.String("generation", gen))...)
			w.Header().Set(GenerationHeader, gen)
			w.WriteHeader(http.StatusNotModified)
			s.Metrics.result(ResultNotModified)
			return
		}
	}
	src, err := s.Source.Open(r.Context(), req.Kind, req.ID)
	if err != nil {
		s.openFailed(w, req, err)
		return
	}
	defer func() { _ = src.Close() }()
	log := s.fields(req)
	s.Log.Info("streaming source to peer", append(log, zap.String("protocol", r.Proto))...)
	w.Header().Set("Content-Type", "application/octet-stream")
	if sized, ok := src.(Sized); ok {
		w.Header().Set(AllocatedHeader, strconv.FormatInt(sized.AllocatedBytes(), 10))
	}
	if g, ok := src.(Generationed); ok && g.Generation() != "" {
		w.Header().Set(GenerationHeader, g.Generation())
	}
	w.WriteHeader(http.StatusOK)
	n, err := io.Copy(s.Metrics.body(w, req.Kind), src)
	if err != nil {
		s.Metrics.result(ResultFailed)
		s.Log.Warn("stream to peer failed; aborting it", append(log, zap.Int64("bytes", n), zap.Error(err))...)
		// The status is sent: only an abort tells the client the stream
		// is incomplete (RST_STREAM in HTTP/2, a closed connection in 1.1).
		panic(http.ErrAbortHandler)
	}
	s.Metrics.result(ResultServed)
	s.Log.Info("streamed source to peer", append(log, zap.Int64("bytes", n))...)
}

// openFailed answers a Source's failure to find or open the source.
func (s *Server) openFailed(w http.ResponseWriter, req Request, err error) {
	if errors.Is(err, ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		s.refused(w, req, http.StatusNotFound, fmt.Sprintf("%s %s: %v", req.Kind, req.ID, err))
	} else {
		s.refused(w, req, http.StatusInternalServerError, fmt.Sprintf("opening %s %s: %v", req.Kind, req.ID, err))
	}
}

func (s *Server) fields(req Request) []zap.Field {
	return []zap.Field{zap.String("requester", req.Node), zap.String("claim", req.Namespace+"/"+req.Claim),
		zap.String("kind", string(req.Kind)), zap.String("source", req.ID)}
}

// refused logs a refusal and answers it; nothing of the source is sent.
func (s *Server) refused(w http.ResponseWriter, req Request, code int, reason string) {
	s.Log.Warn("peer request refused", append(s.fields(req), zap.Int("status", code), zap.String("reason", reason))...)
	s.Metrics.result(resultOfStatus(code))
	http.Error(w, reason, code)
}
