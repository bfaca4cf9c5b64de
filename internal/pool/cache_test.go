package pool

import (
	"strings"
	"testing"
)

func TestParseCacheBytes(t *testing.T) {
	s, err := Parse([]byte(`[{"name":"a","path":"/a","cacheBytes":1073741824},{"name":"b","path":"/b"}]`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a, b := s.All()[0], s.All()[1]
	if a.CacheBytes != 1<<30 || a.CacheLimit(100<<30) != 1<<30 {
		t.Errorf("pool a: cacheBytes %d, limit %d; want 1 GiB", a.CacheBytes, a.CacheLimit(100<<30))
	}
	if got := b.CacheLimit(100 << 30); got != 10<<30 {
		t.Errorf("pool b's default limit on 100 GiB: %d, want 10%% (10 GiB)", got)
	}
	for in, want := range map[string]string{
		`[{"name":"a","path":"/a","cacheBytes":-1}]`:    `datadir[0].cacheBytes: -1 must be zero (the default, 10% of the pool's filesystem) or more`,
		`[{"name":"a","path":"/a","cacheBytes":"10G"}]`: `datadir[0].cacheBytes: must be a whole number of bytes, got a string`,
		`[{"name":"a","path":"/a","cacheBytes":1.5}]`:   `datadir[0].cacheBytes: must be a whole number of bytes`,
	} {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", in, err, want)
		}
	}
}
