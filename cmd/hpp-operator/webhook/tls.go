package webhook

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
)

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

// Intermediate is the default profile: OpenShift's (Mozilla's)
// Intermediate, as github.com/openshift/api defines it.
func Intermediate() TLSProfile {
	p, _, err := profileFromSpec(configv1.TLSProfiles[configv1.TLSProfileIntermediateType])
	if err != nil {
		panic(err) // a table of the pinned openshift/api module: a test catches it
	}
	return p
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
		ids, unknown := cipherIDs(strings.Split(ciphers, ","))
		if len(unknown) > 0 {
			bad = append(bad, fmt.Sprintf("TLS_CIPHERS_OVERRIDE: unknown or insecure cipher(s) %s (use Go/IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256)", strings.Join(unknown, ", ")))
		}
		p.Ciphers = ids
	}
	// Either override can leave TLS 1.2 allowed with no cipher for it (a
	// cipher list of TLS 1.3 suites, or a lower minimum under a TLS
	// 1.3-only profile such as Modern), and Go would then pick its own.
	if err := p.validate(); len(bad) == 0 && err != nil {
		field := "TLS_MIN_VERSION_OVERRIDE"
		if ciphers != "" {
			field = "TLS_CIPHERS_OVERRIDE"
		}
		bad = append(bad, field+": "+err.Error())
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

// cipherIDs looks names up as Go/IANA or OpenSSL names. TLS 1.3 suites
// (which OpenShift's profiles list) are known but left out: Go does not
// make them configurable.
func cipherIDs(names []string) (ids []uint16, unknown []string) {
	byName := map[string]*tls.CipherSuite{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch s, ok := byName[n]; {
		case n == "":
		case ok && slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}):
		case ok:
			ids = append(ids, s.ID)
		default:
			if id, ok := openSSLNames[n]; ok {
				ids = append(ids, id)
			} else {
				unknown = append(unknown, n)
			}
		}
	}
	return ids, unknown
}
