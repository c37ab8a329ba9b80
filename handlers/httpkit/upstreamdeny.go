package httpkit

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/store"
)

// DefaultUpstreamDeny is GATEHOUSE_UPSTREAM_DENY when unset (outbound.DefaultDeny).
const DefaultUpstreamDeny = outbound.DefaultDeny

// upstreamLookupTimeout bounds the name lookup of a written baseUrl.
const upstreamLookupTimeout = 3 * time.Second

// UpstreamDeny lists the upstream addresses a connection's baseUrl may not resolve to
// (GATEHOUSE_UPSTREAM_DENY, parsed by package outbound, which checks it again at dial
// time). A write whose baseUrl names a denied host, or a host that resolves (now) to a
// denied address, is refused with 422 at baseUrl; a name that resolves there later is
// refused when the gateway dials it (502). The zero value denies nothing.
type UpstreamDeny struct {
	outbound.Deny
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ParseUpstreamDeny reads a comma-separated list of CIDRs, addresses and host names;
// "none" denies nothing.
func ParseUpstreamDeny(s string) (UpstreamDeny, error) {
	d, err := outbound.ParseDeny(s)
	return UpstreamDeny{Deny: d}, err
}

// check returns the reason baseURL is refused, or "" when it may be used. A name is
// resolved; a name that does not resolve now is allowed (the dial-time check holds).
func (d UpstreamDeny) Check(ctx context.Context, baseURL string) string {
	if d.Empty() {
		return ""
	}
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return "" // the baseurl rule reports it
	}
	host := u.Hostname()
	if d.DeniesHost(host) {
		return host
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	lookup := d.lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, upstreamLookupTimeout)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if d.DeniesAddr(a) {
			return host + " (" + a.Unmap().String() + ")"
		}
	}
	return ""
}

// UpstreamErrors checks where a connection write sends its key, against the stored
// connection cur (nil on create): a baseUrl whose origin (scheme, host or port)
// differs from the stored one needs apiKey in the same write — the stored key never
// follows a URL to a new host —, and a new or changed baseUrl may not name or
// resolve to an address of GATEHOUSE_UPSTREAM_DENY.
func (s *Core) UpstreamErrors(ctx context.Context, cur *store.Connection, in store.ConnectionInput) limits.FieldErrors {
	var errs limits.FieldErrors
	if cur != nil && in.APIKey == "" && origin(in.BaseURL) != origin(cur.BaseURL) {
		errs = append(errs, FieldError("apiKey", codeKeyForHost))
	}
	if cur == nil || in.BaseURL != cur.BaseURL {
		if host := s.deps.UpstreamDeny.Check(ctx, in.BaseURL); host != "" {
			errs = append(errs, FieldError("baseUrl", CodeUpstreamDenied, host))
		}
	}
	return errs
}

// origin is a URL's scheme, host and port, lower case, with the scheme's default
// port made explicit.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
