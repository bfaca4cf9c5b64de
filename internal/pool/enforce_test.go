package pool

import (
	"testing"
)

func TestParseEnforceSize(t *testing.T) {
	s, err := Parse([]byte(`[
		{"name":"a","path":"/a","enforceSize":true},
		{"name":"b","path":"/b","enforceSize":true,"projectIDs":{"first":100,"last":199}},
		{"name":"c","path":"/c"}
	]`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	pools := s.All()
	if !pools[0].EnforceSize || pools[0].ProjectIDRange() != DefaultProjectIDs {
		t.Errorf("pool a = %+v, range %+v; want enforcing with the default range %+v", pools[0], pools[0].ProjectIDRange(), DefaultProjectIDs)
	}
	if want := (IDRange{First: 100, Last: 199}); pools[1].ProjectIDRange() != want || want.Size() != 100 {
		t.Errorf("pool b range = %+v, want %+v", pools[1].ProjectIDRange(), want)
	}
	if pools[2].EnforceSize {
		t.Error("enforceSize is on without being asked for: the default must be off")
	}
}

func TestParseEnforceSizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"wrong types", `[{"name":"a","path":"/a","enforceSize":"yes","projectIDs":[1,2]}]`, []string{
			`datadir[0].enforceSize: must be true or false, got a string`,
			`datadir[0].projectIDs: must be an object like {"first":4000000,"last":4999999}, got an array`}},
		{"range fields", `[{"name":"a","path":"/a","enforceSize":true,"projectIDs":{"first":-1,"First":3}}]`, []string{
			`datadir[0].projectIDs.first: must be a whole number from 1 to 4294967294, got the number -1`,
			`datadir[0].projectIDs.last: is required`,
			`datadir[0].projectIDs.First: is not a known field; allowed fields are first, last`}},
		{"shared", `[{"name":"a","path":"/a","enforceSize":true,"shared":true}]`, []string{
			`datadir[0].enforceSize: cannot be true on a shared pool: project quotas are set on the node's local XFS or ext4 filesystem, and the nodes of a shared pool would each hand out project IDs`}},
		{"range without enforcement", `[{"name":"a","path":"/a","projectIDs":{"first":1,"last":2}}]`, []string{
			`datadir[0].projectIDs: is set but enforceSize is not true; project IDs are only given to the volumes of an enforcing pool`}},
		{"bad ranges", `[
			{"name":"a","path":"/a","enforceSize":true,"projectIDs":{"first":0,"last":2}},
			{"name":"b","path":"/b","enforceSize":true,"projectIDs":{"first":1,"last":4294967295}},
			{"name":"c","path":"/c","enforceSize":true,"projectIDs":{"first":9,"last":8}}]`, []string{
			`datadir[0].projectIDs.first: must be at least 1: project 0 is the filesystem's default project, which every file outside a project belongs to`,
			`datadir[1].projectIDs.last: 4294967295 is above 4294967294, the largest project ID (2^32-1 means none)`,
			`datadir[2].projectIDs: first 9 is greater than last 8`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.in))
			if s != nil {
				t.Fatalf("Parse returned a set %+v", s.All())
			}
			assertFieldErrors(t, err, tt.want)
		})
	}
}

func TestIDRangeOverlaps(t *testing.T) {
	a := IDRange{First: 10, Last: 20}
	for _, tc := range []struct {
		b    IDRange
		want bool
	}{{IDRange{First: 20, Last: 30}, true}, {IDRange{First: 21, Last: 30}, false}, {IDRange{First: 1, Last: 9}, false}, {IDRange{First: 12, Last: 13}, true}} {
		if got := a.Overlaps(tc.b); got != tc.want {
			t.Errorf("%+v.Overlaps(%+v) = %v, want %v", a, tc.b, got, tc.want)
		}
	}
}
