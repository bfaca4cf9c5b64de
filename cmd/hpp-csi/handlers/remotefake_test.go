package handlers

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hostpath-provisioner/hpp/cmd/hpp-csi/pools"
	"github.com/hostpath-provisioner/hpp/internal/treecopy"
)

// fakeRemote is another node serving one directory as every source:
// treecopy.Encode through an io.Pipe, as the peer transport delivers it.
// Knobs: fetchErr fails Fetch; after sent bytes exceed blockAfter the
// stream waits for gate (or the fetch's cancel); past failAfter it breaks
// with failErr. With generation set, the streams carry it, and a fetch
// naming it as cached is answered "not modified", with nothing sent.
type fakeRemote struct {
	dir, node  string
	alloc      int64
	generation string

	mu         sync.Mutex
	fetchErr   error
	gate       chan struct{}
	blockAfter int64
	failAfter  int64
	failErr    error
	claims     []pools.ClaimRef
	sources    []pools.Source

	// fetches counts every Fetch, streams those that sent data,
	// notModified those answered "not modified".
	fetches     atomic.Int32
	streams     atomic.Int32
	notModified atomic.Int32
	sent        atomic.Int64
	canceled    atomic.Int32
}

func (f *fakeRemote) Fetch(ctx context.Context, src pools.Source, claim pools.ClaimRef, cached string) (*pools.RemoteStream, error) {
	f.fetches.Add(1)
	f.mu.Lock()
	f.claims, f.sources = append(f.claims, claim), append(f.sources, src)
	fetchErr, gate, blockAfter, failAfter, failErr := f.fetchErr, f.gate, f.blockAfter, f.failAfter, f.failErr
	f.mu.Unlock()
	if fetchErr != nil {
		return nil, fetchErr
	}
	if f.generation != "" && cached == f.generation {
		f.notModified.Add(1)
		return &pools.RemoteStream{Node: f.node, Generation: f.generation, NotModified: true}, nil
	}
	f.streams.Add(1)
	pr, pw := io.Pipe()
	// A canceled stream is counted once, by whichever sees the cancel
	// first: the AfterFunc, or the sender whose Write returned the
	// context's error (it may then stop the AfterFunc before it runs).
	// Either counts before it closes the pipe that the copy reads.
	var once sync.Once
	countCanceled := func() { once.Do(func() { f.canceled.Add(1) }) }
	stop := context.AfterFunc(ctx, func() {
		countCanceled()
		pw.CloseWithError(ctx.Err())
	})
	w := &fakeWire{f: f, ctx: ctx, w: pw, gate: gate, blockAfter: blockAfter, failAfter: failAfter, failErr: failErr}
	go func() {
		defer stop()
		_, err := treecopy.Encode(ctx, f.dir, w)
		if err != nil && ctx.Err() != nil {
			countCanceled()
		}
		pw.CloseWithError(err)
	}()
	return &pools.RemoteStream{ReadCloser: pr, Node: f.node, AllocatedBytes: f.alloc, Generation: f.generation}, nil
}

func (f *fakeRemote) set(fn func(f *fakeRemote)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

// fakeWire is the sender's end of one stream, with the knobs applied.
type fakeWire struct {
	f          *fakeRemote
	ctx        context.Context
	w          *io.PipeWriter
	n          int64
	gate       chan struct{}
	blockAfter int64
	failAfter  int64
	failErr    error
}

func (w *fakeWire) Write(p []byte) (int, error) {
	if w.failAfter > 0 && w.n > w.failAfter {
		// The reader sees the transport's error, as from a broken peer.
		w.w.CloseWithError(w.failErr)
		return 0, w.failErr
	}
	if w.gate != nil && w.n > w.blockAfter {
		select {
		case <-w.gate:
		case <-w.ctx.Done():
			return 0, w.ctx.Err()
		}
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	w.f.sent.Add(int64(n))
	return n, err
}
