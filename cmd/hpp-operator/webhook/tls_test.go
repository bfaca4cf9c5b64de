package webhook

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

// OpenShift's Intermediate profile as Go can serve it: its TLS 1.2 ECDHE
// suites, in its order (the DHE ones Go lacks and the TLS 1.3 ones Go does
// not let configure are left out).
var intermediateIDs = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

func TestProfileFromOverrides(t *testing.T) {
	p, err := ProfileFromOverrides(Intermediate(), "", "")
	if err != nil || p.MinVersion != tls.VersionTLS12 || !slices.Equal(p.Ciphers, intermediateIDs) {
		t.Fatalf("no override: %+v %v", p, err)
	}
	p, err = ProfileFromOverrides(Intermediate(), "VersionTLS13", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ECDHE-ECDSA-AES256-GCM-SHA384")
	if err != nil || p.MinVersion != tls.VersionTLS13 ||
		!slices.Equal(p.Ciphers, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}) {
		t.Fatalf("override: %+v %v", p, err)
	}
	_, err = ProfileFromOverrides(Intermediate(), "VersionTLS10", "TLS_RSA_WITH_RC4_128_SHA,NOPE")
	want := `TLS_MIN_VERSION_OVERRIDE: "VersionTLS10" is not one of VersionTLS12, VersionTLS13 (older versions are refused); ` +
		`TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) TLS_RSA_WITH_RC4_128_SHA, NOPE (use Go/IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256)`
	if err == nil || err.Error() != want {
		t.Fatalf("bad overrides:\n got  %v\n want %s", err, want)
	}
	_, err = ProfileFromOverrides(Intermediate(), "", "TLS_AES_128_GCM_SHA256")
	if err == nil || !strings.Contains(err.Error(), "TLS_CIPHERS_OVERRIDE: no cipher Go supports for TLS 1.2") {
		t.Fatalf("TLS 1.3 suites only, TLS 1.2 allowed: %v", err)
	}
	modern := TLSProfile{MinVersion: tls.VersionTLS13}
	if p, err = ProfileFromOverrides(modern, "VersionTLS12", ""); err == nil || !strings.Contains(err.Error(), "TLS_MIN_VERSION_OVERRIDE: no cipher Go supports for TLS 1.2") {
		t.Fatalf("TLS 1.2 allowed under a TLS 1.3-only profile with no cipher: %+v %v", p, err)
	}
}

func TestProfileFromOpenShift(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile *configv1.TLSSecurityProfile
		min     uint16
		ciphers []uint16
		skipped []string
	}{
		{"unset is Intermediate", nil, tls.VersionTLS12, intermediateIDs, []string{"DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384"}},
		{"Modern", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, tls.VersionTLS13, nil, nil},
		{"Custom", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
			TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"ECDHE-RSA-AES256-GCM-SHA384", "DHE-RSA-AES256-GCM-SHA384"}}}},
			tls.VersionTLS12, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, []string{"DHE-RSA-AES256-GCM-SHA384"}},
	} {
		p, skipped, err := ProfileFromOpenShift(tc.profile)
		if err != nil || p.MinVersion != tc.min || !slices.Equal(p.Ciphers, tc.ciphers) || !slices.Equal(skipped, tc.skipped) {
			t.Errorf("%s: %+v skipped %v, %v; want min %x ciphers %v skipped %v", tc.name, p, skipped, err, tc.min, tc.ciphers, tc.skipped)
		}
	}
	old, _, err := ProfileFromOpenShift(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType})
	if err != nil || old.MinVersion != tls.VersionTLS10 || !slices.Contains(old.Ciphers, tls.TLS_RSA_WITH_AES_128_CBC_SHA) {
		t.Errorf("Old: %+v, %v; want TLS 1.0 and AES128-SHA", old, err)
	}
	_, _, err = ProfileFromOpenShift(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
		TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"DHE-RSA-AES256-GCM-SHA384"}}}})
	if err == nil || err.Error() != "no cipher Go supports for TLS 1.2 or older is left, and the minimum version allows them" {
		t.Errorf("Custom without a usable cipher: %v", err)
	}
	_, _, err = ProfileFromOpenShift(&configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType})
	if err == nil || !strings.Contains(err.Error(), "type Custom without custom") {
		t.Errorf("Custom without its spec: %v", err)
	}
}

func TestApplyTurnsHTTP2Off(t *testing.T) {
	c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	Intermediate().Apply(c)
	if !slices.Equal(c.NextProtos, []string{"http/1.1"}) || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("%+v", c)
	}
}
