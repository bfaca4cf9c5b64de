package provisioner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestVolumeID(t *testing.T) {
	const pv = "pvc-0123456789abcdef0123456789abcdef0123" // 40 bytes
	tests := []struct {
		claim   string
		prefix  bool
		want    string
		wantErr string
	}{
		{"data", false, pv, ""},
		{"data", true, "data-" + pv, ""},
		{"vm.disk-0", true, "vm.disk-0-" + pv, ""},
		{strings.Repeat("c", 214), true, strings.Repeat("c", 214) + "-" + pv, ""}, // exactly 255
		{strings.Repeat("c", 215), true, "", `the volume directory name "` + strings.Repeat("c", 64) +
			`..." would be 256 bytes, more than the 255 a directory name may have: with USE_NAMING_PREFIX=true the claim name may be at most 214 characters; use a shorter claim name`},
		{strings.Repeat("c", 253), false, pv, ""}, // the claim name does not matter without the prefix
	}
	for _, tt := range tests {
		got, err := VolumeID(tt.claim, pv, tt.prefix)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("VolumeID(%.20s..., %v) = %q, %v\nwant %q, %q", tt.claim, tt.prefix, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := VolumeID("x", "lost+found", false); err == nil || err.Error() != `the volume directory name is not usable: volume id: "lost+found" is reserved: it is the filesystem's recovery directory` {
		t.Errorf("reserved name: %v", err)
	}
}

func TestEventName(t *testing.T) {
	ref := v1.ObjectReference{Name: strings.Repeat("n", 253), UID: "u"}
	name := eventName(ref, ReasonNoNode)
	if len(name) != 253 || !strings.HasPrefix(name, strings.Repeat("n", 236)+".hpp-") {
		t.Errorf("eventName of a 253-character name = %q (%d)", name, len(name))
	}
	if eventName(ref, ReasonNoNode) != name || eventName(ref, ReasonSingleNode) == name {
		t.Error("event names must be stable per reason and differ between reasons")
	}
	short := eventName(v1.ObjectReference{Name: "claim", UID: "u"}, ReasonNoNode)
	if !strings.HasPrefix(short, "claim.hpp-") || len(short) != len("claim.hpp-")+12 {
		t.Errorf("eventName = %q", short)
	}
}
