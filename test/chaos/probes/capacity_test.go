package probes

import (
	"errors"
	"strings"
	"testing"
)

func TestCapacity(t *testing.T) {
	free := int64(200 << 20)
	var v *Violation
	for _, c := range []struct {
		name      string
		published *int64
		violation string
	}{
		{"equal", ptr(free), ""},
		{"a poll behind the writers", ptr(free + 64<<10), ""},
		{"stale after the pool was filled", ptr(free + 150<<20), "off by 157286400"},
		{"stale after the pool was freed", ptr(free - 150<<20), "off by -157286400"},
		{"never published", nil, "no CSIStorageCapacity"},
	} {
		err := CheckCapacity("pool full", c.published, free)
		switch {
		case c.violation == "" && err != nil:
			t.Errorf("%s: %v, want none", c.name, err)
		case c.violation != "" && (!errors.As(err, &v) || !strings.Contains(err.Error(), c.violation)):
			t.Errorf("%s: %v, want a violation saying %q", c.name, err, c.violation)
		}
	}
}

func ptr(v int64) *int64 { return &v }
