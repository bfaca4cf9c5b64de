package webhook

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// intermediateCiphers is Mozilla's Intermediate profile for TLS 1.2 (the
// default of OpenShift's and most clusters' crypto policy); TLS 1.3 suites
// are not configurable in Go.
var intermediateCiphers = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// openSSLNames maps the OpenSSL cipher names that OpenShift's TLS profiles
// use to Go's suites, so an override can be copied from the cluster policy.
var openSSLNames = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-ECDSA-AES128-SHA256":     tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-RSA-AES128-SHA256":       tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
	"ECDHE-ECDSA-AES128-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA,
	"ECDHE-RSA-AES128-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
	"ECDHE-ECDSA-AES256-SHA":        tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA,
	"ECDHE-RSA-AES256-SHA":          tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
	"AES128-SHA256":                 tls.TLS_RSA_WITH_AES_128_CBC_SHA256,
	"AES128-SHA":                    tls.TLS_RSA_WITH_AES_128_CBC_SHA,
	"AES256-SHA":                    tls.TLS_RSA_WITH_AES_256_CBC_SHA,
}

// TLSProfile is the webhook server's TLS policy.
type TLSProfile struct {
	MinVersion uint16
	Ciphers    []uint16
}

// Intermediate is the default profile.
func Intermediate() TLSProfile {
	return TLSProfile{MinVersion: tls.VersionTLS12, Ciphers: intermediateCiphers}
}

// ProfileFromOverrides applies TLS_MIN_VERSION_OVERRIDE and
// TLS_CIPHERS_OVERRIDE (either may be empty) to base. Every unknown name is
// reported at once.
func ProfileFromOverrides(base TLSProfile, minVersion, ciphers string) (TLSProfile, error) {
	p := base
	var bad []string
	if minVersion != "" {
		switch strings.TrimSpace(minVersion) {
		case "VersionTLS12", "1.2", "TLSv1.2":
			p.MinVersion = tls.VersionTLS12
		case "VersionTLS13", "1.3", "TLSv1.3":
			p.MinVersion = tls.VersionTLS13
		default:
			bad = append(bad, fmt.Sprintf("TLS_MIN_VERSION_OVERRIDE: %q is not one of VersionTLS12, VersionTLS13 (older versions are refused)", minVersion))
		}
	}
	if ciphers != "" {
		byName := map[string]uint16{}
		for _, s := range tls.CipherSuites() {
			byName[s.Name] = s.ID
		}
		var ids []uint16
		var unknown []string
		for _, n := range strings.Split(ciphers, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if id, ok := byName[n]; ok {
				ids = append(ids, id)
			} else if id, ok := openSSLNames[n]; ok {
				ids = append(ids, id)
			} else {
				unknown = append(unknown, n)
			}
		}
		if len(unknown) > 0 {
			bad = append(bad, fmt.Sprintf("TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) %s (use Go/IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256)", strings.Join(unknown, ", ")))
		}
		p.Ciphers = ids
	}
	if len(bad) > 0 {
		return base, fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return p, nil
}

// Apply sets the profile on a server config and turns HTTP/2 off (the
// HTTP/2 rapid-reset and stream-exhaustion attacks; the API server speaks
// HTTP/1.1 to webhooks anyway).
func (p TLSProfile) Apply(c *tls.Config) {
	c.MinVersion = p.MinVersion
	c.CipherSuites = p.Ciphers
	c.NextProtos = []string{"http/1.1"}
}
