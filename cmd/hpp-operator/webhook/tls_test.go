package webhook

import (
	"crypto/tls"
	"slices"
	"testing"
)

func TestProfileFromOverrides(t *testing.T) {
	p, err := ProfileFromOverrides(Intermediate(), "", "")
	if err != nil || p.MinVersion != tls.VersionTLS12 || !slices.Equal(p.Ciphers, intermediateCiphers) {
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
}

func TestApplyTurnsHTTP2Off(t *testing.T) {
	c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	Intermediate().Apply(c)
	if !slices.Equal(c.NextProtos, []string{"http/1.1"}) || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("%+v", c)
	}
}
