package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"sync/atomic"

	configv1 "github.com/openshift/api/config/v1"
)

// tlsVersions are the TLS versions of OpenShift's profiles.
var tlsVersions = map[configv1.TLSProtocolVersion]uint16{
	configv1.VersionTLS10: tls.VersionTLS10,
	configv1.VersionTLS11: tls.VersionTLS11,
	configv1.VersionTLS12: tls.VersionTLS12,
	configv1.VersionTLS13: tls.VersionTLS13,
}

// ProfileFromOpenShift is the profile an OpenShift APIServer's
// tlsSecurityProfile asks for: a predefined one (Old, Intermediate, Modern,
// as github.com/openshift/api defines them) or Custom; none set means
// Intermediate, as on OpenShift. Cipher names Go does not implement (DHE,
// 3DES, ...) are returned in skipped rather than refused: the profiles are
// cluster-wide lists that every component filters to what it supports.
func ProfileFromOpenShift(p *configv1.TLSSecurityProfile) (profile TLSProfile, skipped []string, err error) {
	t := profileType(p)
	if t == configv1.TLSProfileCustomType {
		if p.Custom == nil {
			return TLSProfile{}, nil, errors.New("tlsSecurityProfile: type Custom without custom (ciphers, minTLSVersion)")
		}
		return profileFromSpec(&p.Custom.TLSProfileSpec)
	}
	spec, ok := configv1.TLSProfiles[t]
	if !ok {
		return TLSProfile{}, nil, fmt.Errorf("tlsSecurityProfile.type: %q is not one of Old, Intermediate, Modern, Custom", t)
	}
	return profileFromSpec(spec)
}

// profileType is the profile's type; none set means Intermediate, as on
// OpenShift.
func profileType(p *configv1.TLSSecurityProfile) configv1.TLSProfileType {
	if p == nil || p.Type == "" {
		return configv1.TLSProfileIntermediateType
	}
	return p.Type
}

func profileFromSpec(spec *configv1.TLSProfileSpec) (TLSProfile, []string, error) {
	v, ok := tlsVersions[spec.MinTLSVersion]
	if !ok {
		return TLSProfile{}, nil, fmt.Errorf("tlsSecurityProfile: minTLSVersion %q is not one of VersionTLS10..VersionTLS13", spec.MinTLSVersion)
	}
	ids, skipped := cipherIDs(spec.Ciphers)
	p := TLSProfile{MinVersion: v, Ciphers: ids}
	return p, skipped, p.validate()
}

// validate refuses a profile that would let Go pick its own defaults:
// TLS 1.2 or older allowed but no cipher for it left.
func (p TLSProfile) validate() error {
	if p.MinVersion < tls.VersionTLS13 && len(p.Ciphers) == 0 {
		return errors.New("no cipher Go supports for TLS 1.2 or older is left, and the minimum version allows them")
	}
	return nil
}

// TLSPolicy is the webhook server's TLS profile as it is now: the
// TLS_*_OVERRIDE environment variables over the cluster's profile. The
// cluster's profile can change while the server runs (OpenShift's
// APIServer, see ClusterTLSProfile); every handshake reads the current one,
// so a change needs no restart.
type TLSPolicy struct {
	minOverride, ciphersOverride string
	current                      atomic.Pointer[TLSProfile]
}

// NewTLSPolicy checks the overrides (every unknown name at once) and starts
// from Intermediate under them.
func NewTLSPolicy(minOverride, ciphersOverride string) (*TLSPolicy, error) {
	p := &TLSPolicy{minOverride: minOverride, ciphersOverride: ciphersOverride}
	return p, p.SetClusterProfile(Intermediate())
}

// SetClusterProfile makes base, under the overrides, the profile of the
// next handshakes.
func (p *TLSPolicy) SetClusterProfile(base TLSProfile) error {
	prof, err := ProfileFromOverrides(base, p.minOverride, p.ciphersOverride)
	if err != nil {
		return err
	}
	p.current.Store(&prof)
	return nil
}

// Profile is the current profile.
func (p *TLSPolicy) Profile() TLSProfile { return *p.current.Load() }

// Apply sets the current profile on a server config (HTTP/2 off) and makes
// every handshake use the profile current at that moment.
func (p *TLSPolicy) Apply(c *tls.Config) {
	p.Profile().Apply(c)
	// One config per profile, built at the first handshake under it: c is
	// read then, not when Apply ran, since the server sets its
	// certificate callback on it afterwards.
	type built struct {
		profile *TLSProfile
		config  *tls.Config
	}
	var last atomic.Pointer[built]
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cur := p.current.Load()
		if b := last.Load(); b != nil && b.profile == cur {
			return b.config, nil
		}
		out := c.Clone()
		out.GetConfigForClient = nil
		cur.Apply(out)
		last.Store(&built{profile: cur, config: out})
		return out, nil
	}
}

// VersionName is OpenShift's (and upstream's --metrics-tls-version) name of
// a TLS version: VersionTLS12 for tls.VersionTLS12.
func VersionName(v uint16) string {
	for name, id := range tlsVersions {
		if id == v {
			return string(name)
		}
	}
	return fmt.Sprintf("0x%04x", v)
}
