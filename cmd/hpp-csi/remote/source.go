package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"go.uber.org/zap"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/peer"
	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// Source serves this node's volumes and snapshots to its peers: a
// peer.Source over the pool runtime.
type Source struct {
	RT  *pools.Runtime
	Log *zap.Logger
}

// errClosed ends an encoding whose reader went away.
var errClosed = errors.New("stream closed by its reader")

// Open finds the source and starts encoding it. A source that is not here
// wraps peer.ErrNotFound; the lock that keeps it from deletion is held
// until the stream ends or is closed.
func (s *Source) Open(ctx context.Context, kind peer.Kind, id string) (io.ReadCloser, error) {
	src := pools.Source{Snapshot: kind == peer.KindSnapshot, ID: id}
	dir, allocated, generation, release, err := s.RT.OpenSourceDir(ctx, src)
	if err != nil {
		if pools.KindOf(err) == pools.NotFound {
			return nil, fmt.Errorf("%w: %w", peer.ErrNotFound, err)
		}
		return nil, err
	}
	log := s.Log
	if log == nil {
		log = zap.NewNop()
	}
	pr, pw := io.Pipe()
	st := &sourceStream{PipeReader: pr, allocated: allocated, generation: generation, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		stats, err := treecopy.Encode(ctx, dir, pw)
		// Released before the reader sees the end: the pipe's writes
		// return only once read, so the tree is no longer read here.
		release()
		if err != nil {
			log.Warn("encoding source for peer failed", zap.String("kind", string(kind)), zap.String("source", id), zap.Error(err))
			_ = pw.CloseWithError(err)
			return
		}
		log.Debug("source encoded for peer", zap.String("kind", string(kind)), zap.String("source", id),
			zap.Int64("files", stats.Files), zap.Int64("bytes", stats.Bytes))
		_ = pw.Close()
	}()
	return st, nil
}

// Generation answers a peer that holds a copy of the source
// (peer.Generations): the source's generation now, without its data.
func (s *Source) Generation(ctx context.Context, kind peer.Kind, id string) (string, error) {
	gen, err := s.RT.SourceGeneration(ctx, pools.Source{Snapshot: kind == peer.KindSnapshot, ID: id})
	if err != nil && pools.KindOf(err) == pools.NotFound {
		return "", fmt.Errorf("%w: %w", peer.ErrNotFound, err)
	}
	return gen, err
}

// sourceStream is the reading end of an encoding.
type sourceStream struct {
	*io.PipeReader
	allocated  int64
	generation string
	done       chan struct{}
	once       sync.Once
}

// AllocatedBytes is sent to the peer (peer.Sized).
func (s *sourceStream) AllocatedBytes() int64 { return s.allocated }

// Generation is sent to the peer (peer.Generationed).
func (s *sourceStream) Generation() string { return s.generation }

// Close stops the encoding if it still runs and waits for it to end, so
// the source's lock is released when Close returns.
func (s *sourceStream) Close() error {
	s.once.Do(func() { _ = s.CloseWithError(errClosed) })
	<-s.done
	return nil
}
