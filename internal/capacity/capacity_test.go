package capacity

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

func TestHeadroomValidate(t *testing.T) {
	tests := []struct {
		h    Headroom
		want []string
	}{
		{Headroom{}, nil},
		{Headroom{Bytes: 1 << 30, Percent: 99.9}, nil},
		{Headroom{Bytes: -1}, []string{`datadir[0]: reserved bytes -1 must be zero or more`}},
		{Headroom{Percent: 100}, []string{`datadir[0]: reserved percent 100 must be at least 0 and less than 100`}},
		{Headroom{Percent: math.NaN()}, []string{`datadir[0]: reserved percent NaN must be at least 0 and less than 100`}},
		{Headroom{Bytes: -5, Percent: -0.5}, []string{
			`datadir[0]: reserved bytes -5 must be zero or more`,
			`datadir[0]: reserved percent -0.5 must be at least 0 and less than 100`}},
	}
	for _, tt := range tests {
		err := tt.h.Validate("datadir[0]")
		if tt.want == nil {
			if err != nil {
				t.Errorf("%+v: unexpected %v", tt.h, err)
			}
			continue
		}
		if err == nil || err.Error() != strings.Join(tt.want, "\n") {
			t.Errorf("%+v: got %v\nwant %s", tt.h, err, strings.Join(tt.want, "\n"))
			continue
		}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *fieldrule.FieldError
			if !errors.As(e, &fe) || fe.Field != "datadir[0]" {
				t.Errorf("%T %v is not a *fieldrule.FieldError for datadir[0]", e, e)
			}
		}
	}
}

func TestReservedAndOffered(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name              string
		h                 Headroom
		total, avail      int64
		reserved, offered int64
	}{
		{"none", Headroom{}, 100 * gib, 40 * gib, 0, 40 * gib},
		{"bytes win", Headroom{Bytes: 10 * gib, Percent: 5}, 100 * gib, 40 * gib, 10 * gib, 30 * gib},
		{"percent wins", Headroom{Bytes: gib, Percent: 20}, 100 * gib, 40 * gib, 20 * gib, 20 * gib},
		{"percent rounds up", Headroom{Percent: 10}, 1001, 1001, 101, 900},
		{"reserve above available", Headroom{Bytes: 50 * gib}, 100 * gib, 40 * gib, 50 * gib, 0},
		{"invalid parts count as zero", Headroom{Bytes: -1, Percent: 150}, 100, 100, 0, 100},
		{"NaN percent", Headroom{Percent: math.NaN()}, 100, 100, 0, 100},
		{"huge total", Headroom{Percent: 50}, math.MaxInt64, math.MaxInt64, 1 << 62, math.MaxInt64 - 1<<62},
		{"empty filesystem", Headroom{Percent: 50}, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Reserved(tt.total); got != tt.reserved {
				t.Errorf("Reserved(%d) = %d, want %d", tt.total, got, tt.reserved)
			}
			st := Stats{TotalBytes: tt.total, AvailableBytes: tt.avail}
			if got := Offered(st, tt.h); got != tt.offered {
				t.Errorf("Offered = %d, want %d", got, tt.offered)
			}
		})
	}
}

func TestBadPaths(t *testing.T) {
	check := func(what string, err error, want string) {
		t.Helper()
		var fe *fieldrule.FieldError
		if !errors.As(err, &fe) || err.Error() != want {
			t.Errorf("%s: got %v, want %s", what, err, want)
		}
	}
	_, err := Statfs("")
	check(`Statfs("")`, err, `path: must not be empty`)
	_, err = Statfs("var/lib")
	check(`Statfs("var/lib")`, err, `path: "var/lib" must be an absolute path`)
	_, err = Statfs("/a\x00")
	check(`Statfs("/a\x00")`, err, `path: "/a\x00" must not contain a NUL byte`)
	_, err = SameFilesystem("rel", "")
	if err == nil || err.Error() != "a: \"rel\" must be an absolute path\nb: must not be empty" {
		t.Errorf("SameFilesystem(rel, \"\") = %v", err)
	}
}
