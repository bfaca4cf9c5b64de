package peer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// genSource is the fake with generations: Generation answers without
// opening, and the opened reader tells its generation.
type genSource struct {
	*fakeSource
	gens  map[string]string
	asked atomic.Int32
}

func (g *genSource) Generation(_ context.Context, kind Kind, id string) (string, error) {
	g.asked.Add(1)
	gen, ok := g.gens[string(kind)+"/"+id]
	if !ok {
		return "", ErrNotFound
	}
	return gen, nil
}

func (g *genSource) Open(ctx context.Context, kind Kind, id string) (io.ReadCloser, error) {
	rc, err := g.fakeSource.Open(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return genReader{rc, g.gens[string(kind)+"/"+id]}, nil
}

type genReader struct {
	io.ReadCloser
	gen string
}

func (r genReader) Generation() string { return r.gen }

func TestCachedGeneration(t *testing.T) {
	var gs *genSource
	e := startWith(t, func(f *fakeSource) Source {
		gs = &genSource{fakeSource: f, gens: map[string]string{"volume/vol-1": "g1", "volume/vol-2": GenerationLive}}
		return gs
	})
	c := e.client(t, "node-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fetch := func(id, claim, cached string) (*Stream, []byte, error) {
		rc, err := c.FetchIfChanged(ctx, e.nodeA(), KindVolume, id, ns, claim, cached)
		if err != nil {
			return nil, nil, err
		}
		defer func() { _ = rc.Close() }()
		data, err := io.ReadAll(rc)
		return rc.(*Stream), data, err
	}

	// Unchanged since the requester's copy: 304, nothing opened or sent.
	st, data, err := fetch("vol-1", "clone-b", "g1")
	if err != nil || !st.NotModified || st.Generation != "g1" || len(data) != 0 {
		t.Fatalf("cached at the current generation: %+v, %d bytes, %v; want not modified", st, len(data), err)
	}
	if n := e.source.openCount(); n != 0 {
		t.Fatalf("the source was opened %d times for a not-modified answer", n)
	}
	if nm, sent := e.requests(t, ResultNotModified), e.sentBytes(t, KindVolume); nm != 1 || sent != 0 {
		t.Fatalf("not_modified %v, sent %v bytes; want 1 and 0", nm, sent)
	}
	// Changed: the data, with the generation.
	st, data, err = fetch("vol-1", "clone-b", "g0")
	if err != nil || st.NotModified || st.Generation != "g1" || !bytes.Equal(data, volumeData) {
		t.Fatalf("cached at an old generation: %+v, %d bytes, %v; want the data at g1", st, len(data), err)
	}
	// Live: never "not modified", even for a requester claiming "live".
	st, data, err = fetch("vol-2", "clone2-b", GenerationLive)
	if err != nil || st.NotModified || st.Generation != GenerationLive || string(data) != "two" {
		t.Fatalf("live source: %+v, %q, %v; want the data, generation live", st, data, err)
	}
	// A refused request learns nothing, not even the generation.
	asked := gs.asked.Load()
	_, _, err = fetch("vol-1", "clone-c", "g1")
	if !errors.Is(err, ErrNotAuthorized) || gs.asked.Load() != asked {
		t.Fatalf("refused claim: %v, generation asked %d times more; want 403 and none", err, gs.asked.Load()-asked)
	}
	// A malformed generation is 400, naming the header.
	_, _, err = fetch("vol-1", "clone-b", "a b")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != 400 || !strings.Contains(fe.Reason, CachedGenerationHeader) {
		t.Fatalf("malformed generation: %v, want 400 naming %s", err, CachedGenerationHeader)
	}
}
