package pool

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hostpath-provisioner/hpp/internal/contract"
	"github.com/hostpath-provisioner/hpp/internal/fieldrule"
)

func TestParseValid(t *testing.T) {
	s, err := Parse([]byte(`[
		{"name":"legacy","path":"/var/hpvolumes"},
		{"name":"fast-1.ssd_a","path":"/mnt/fast","reservedBytes":1073741824,"reservedPercent":5.5},
		{"name":"pvc","path":"/var/pvc/csi","mounted":true}
	]`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Pool{
		{Name: "legacy", Path: "/var/hpvolumes"},
		{Name: "fast-1.ssd_a", Path: "/mnt/fast", ReservedBytes: 1 << 30, ReservedPercent: 5.5},
		{Name: "pvc", Path: "/var/pvc/csi", Mounted: true},
	}
	if got := s.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("All() = %+v, want %+v", got, want)
	}
	p, ok := s.Get("fast-1.ssd_a")
	if !ok || p != want[1] {
		t.Fatalf("Get = %+v, %v", p, ok)
	}
	if _, ok := s.Get("nope"); ok {
		t.Fatal("Get(nope) found a pool")
	}
	// The path is the volumes directory itself (the KubeVirt meaning).
	if got, err := p.VolumePath("pvc-1"); err != nil || got != "/mnt/fast/pvc-1" {
		t.Fatalf("VolumePath = %q, %v; want /mnt/fast/pvc-1", got, err)
	}
	// All must return a copy: callers cannot change the set.
	s.All()[0].Name = "changed"
	if s.All()[0].Name != "legacy" {
		t.Fatal("All() exposes the internal slice")
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", 51)
	longPath := "/" + strings.Repeat("p", 255)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty input", ``, []string{
			`datadir: is empty; it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"syntax error", `[{"name":"a",}]`, []string{
			`datadir: is not valid JSON (invalid character '}' looking for beginning of object key string); it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"trailing garbage", `[] x`, []string{
			`datadir: is not valid JSON (invalid character 'x' after top-level value); it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"object not array", `{"name":"a","path":"/a"}`, []string{
			`datadir: is a JSON object; it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"string not array", `"/var/hpvolumes"`, []string{
			`datadir: is a JSON string; it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"null", `null`, []string{
			`datadir: is null; it must be a JSON array of pools like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"empty array", `[]`, []string{
			`datadir: lists no pools; it must list at least one, like [{"name":"legacy","path":"/var/hpvolumes"}]`}},
		{"entry not object", `[42, null, {"name":"ok","path":"/ok"}]`, []string{
			`datadir[0]: must be a JSON object with "name" and "path", got the number 42`,
			`datadir[1]: must be a JSON object with "name" and "path", got null`}},
		{"unknown and miscased fields", `[{"name":"a","path":"/a","Path":"/b","size":"1Gi"}]`, []string{
			`datadir[0].Path: is not a known field; allowed fields are name, path, snapshotPath, snapshotProvider, shared, reservedBytes, reservedPercent, legacyPath, mounted, enforceSize, projectIDs, cacheBytes`,
			`datadir[0].size: is not a known field; allowed fields are name, path, snapshotPath, snapshotProvider, shared, reservedBytes, reservedPercent, legacyPath, mounted, enforceSize, projectIDs, cacheBytes`}},
		{"wrong types", `[{"name":1,"path":["/a"],"reservedBytes":"1Gi","reservedPercent":true,"mounted":"yes"}]`, []string{
			`datadir[0].mounted: must be true or false, got a string`,
			`datadir[0].name: must be a string, got the number 1`,
			`datadir[0].path: must be a string, got an array`,
			`datadir[0].reservedBytes: must be a whole number of bytes, got a string`,
			`datadir[0].reservedPercent: must be a number, got a boolean`}},
		{"fractional bytes", `[{"name":"a","path":"/a","reservedBytes":1.5}]`, []string{
			`datadir[0].reservedBytes: must be a whole number of bytes, got the number 1.5`}},
		{"missing name and path", `[{}]`, []string{
			`datadir[0].name: is required (a pool name: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 50 characters)`,
			`datadir[0].path: must not be empty`}},
		{"bad names", `[{"name":"-a","path":"/a"},{"name":"a b","path":"/b"},{"name":"` + long + `","path":"/c"},{"name":"pööl","path":"/d"}]`, []string{
			`datadir[0].name: "-a" must start with a letter or digit`,
			`datadir[1].name: "a b" contains " "; a pool name may only contain letters, digits, '.', '_' and '-'`,
			`datadir[2].name: is 51 characters long; at most 50 are allowed`,
			`datadir[3].name: "pööl" contains "ö"; a pool name may only contain letters, digits, '.', '_' and '-'`}},
		{"bad paths", `[{"name":"a","path":"var/x"},{"name":"b","path":"//"},{"name":"c","path":"/"},{"name":"d","path":"` + longPath + `"},{"name":"e","path":"/a\u0000b"},{"name":"f","path":"/x/../y"}]`, []string{
			`datadir[0].path: "var/x" must be an absolute path`,
			`datadir[1].path: "//" is the whole root filesystem; a pool must be a directory below it`,
			`datadir[2].path: "/" is the whole root filesystem; a pool must be a directory below it`,
			`datadir[3].path: is 256 characters long; at most 255 are allowed`,
			`datadir[4].path: "/a\x00b" must not contain a NUL byte`,
			`datadir[5].path: "/x/../y" must not contain a '..' element`}},
		{"duplicates and nesting", `[
			{"name":"a","path":"/pools/a"},
			{"name":"a","path":"/pools/b"},
			{"name":"c","path":"/pools/a"},
			{"name":"d","path":"/pools/a/inner"},
			{"name":"e","path":"/pools"},
			{"name":"f","path":"/pools-a"}]`, []string{
			`datadir[1].name: "a" is already used by datadir[0]; pool names must be unique`,
			`datadir[2].path: "/pools/a" is already used by datadir[0]; pool paths must be unique`,
			`datadir[3].path: "/pools/a/inner" is inside datadir[0].path "/pools/a"; pools must not be nested`,
			`datadir[4].path: "/pools" contains datadir[0].path "/pools/a"; pools must not be nested`}},
		{"reserve out of range", `[{"name":"a","path":"/a","reservedBytes":-1,"reservedPercent":100},{"name":"b","path":"/b","reservedPercent":-0.5}]`, []string{
			`datadir[0].reservedBytes: -1 must be zero or more`,
			`datadir[0].reservedPercent: 100 must be at least 0 and less than 100`,
			`datadir[1].reservedPercent: -0.5 must be at least 0 and less than 100`}},
		{"decode and validation problems together", `[{"name":"a","path":"/a","extra":1},{"name":"a","path":"rel"}]`, []string{
			`datadir[0].extra: is not a known field; allowed fields are name, path, snapshotPath, snapshotProvider, shared, reservedBytes, reservedPercent, legacyPath, mounted, enforceSize, projectIDs, cacheBytes`,
			`datadir[1].path: "rel" must be an absolute path`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.in))
			if s != nil {
				t.Fatalf("Parse returned a set %+v with error %v", s.All(), err)
			}
			assertFieldErrors(t, err, tt.want)
		})
	}
}

// assertFieldErrors checks that err joins exactly want, in order, each a
// *fieldrule.FieldError.
func assertFieldErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not errors.Join: %v", err, err)
	}
	var got []string
	for _, e := range joined.Unwrap() {
		var fe *fieldrule.FieldError
		if !errors.As(e, &fe) {
			t.Errorf("%T is not a *fieldrule.FieldError: %v", e, e)
		}
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func TestNewSetValidatesLikeParse(t *testing.T) {
	_, err := NewSet([]Pool{{Name: "a", Path: "/a"}, {Name: "b", Path: "/a/b", ReservedPercent: 100}})
	assertFieldErrors(t, err, []string{
		`datadir[1].reservedPercent: 100 must be at least 0 and less than 100`,
		`datadir[1].path: "/a/b" is inside datadir[0].path "/a"; pools must not be nested`,
	})
	_, err = NewSet(nil)
	assertFieldErrors(t, err, []string{
		`datadir: lists no pools; it must list at least one, like [{"name":"legacy","path":"/var/hpvolumes"}]`,
	})
}

func TestSelect(t *testing.T) {
	multi := mustSet(t, Pool{Name: "legacy", Path: "/var/hpvolumes"}, Pool{Name: "fast", Path: "/mnt/fast"})
	single := mustSet(t, Pool{Name: "only", Path: "/only"})
	noLegacy := mustSet(t, Pool{Name: "b", Path: "/b"}, Pool{Name: "a", Path: "/a"})
	tests := []struct {
		name    string
		set     *Set
		param   string
		want    string
		wantErr string
	}{
		{"empty picks legacy", multi, "", "legacy", ""},
		{"named", multi, "fast", "fast", ""},
		{"empty picks the only pool", single, "", "only", ""},
		{"only pool by name", single, "only", "only", ""},
		{"empty with several and no legacy", noLegacy, "", "",
			`parameters.` + contract.ParamStoragePool + `: is not set, and with 2 pools and no pool named "legacy" the StorageClass must set ` + contract.ParamStoragePool + ` to one of: "a", "b"`},
		{"unknown", multi, "slow", "",
			`parameters.` + contract.ParamStoragePool + `: "slow" is not a pool on this node; available pools: "fast", "legacy"`},
		{"unknown with one pool", single, "legacy", "",
			`parameters.` + contract.ParamStoragePool + `: "legacy" is not a pool on this node; available pools: "only"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.set.Select(tt.param)
			if tt.wantErr != "" {
				var fe *fieldrule.FieldError
				if !errors.As(err, &fe) || fe.Field != "parameters."+contract.ParamStoragePool || err.Error() != tt.wantErr {
					t.Fatalf("Select(%q) = %+v, %v; want error %q", tt.param, p, err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Name != tt.want {
				t.Fatalf("Select(%q) = %+v, %v; want pool %q", tt.param, p, err, tt.want)
			}
		})
	}
}

func mustSet(t *testing.T, pools ...Pool) *Set {
	t.Helper()
	s, err := NewSet(pools)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	return s
}
