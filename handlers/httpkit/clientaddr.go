package httpkit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses GATEHOUSE_TRUSTED_PROXIES: comma-separated CIDRs (a bare
// address counts as a /32 or /128). Empty means no proxy is trusted. The error names
// the entry that is wrong.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("entry %d %q: not a CIDR (e.g. 10.0.0.0/8) or an address", i+1, part)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("entry %d %q: not a CIDR (e.g. 10.0.0.0/8)", i+1, part)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// clientAddr is the address of the client behind r, used alike for sign-in
// throttling, the audit log and the logs. It is the TCP peer, unless the peer is one of
// the trusted proxies: then X-Forwarded-For is read from the right, skipping trusted
// hops, and the first address that is not a trusted proxy is the client. Entries left
// of it were written by the client itself and are never believed. A header that is
// missing or unreadable at that point leaves the last trusted hop as the address.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	addr, err := netip.ParseAddr(peer)
	if err != nil {
		return peer // not an IP (a test's or a unix socket's peer): use as is
	}
	addr = addr.Unmap()
	if !isTrusted(addr, trusted) {
		return addr.String()
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			hop, err := parseHop(parts[j])
			if err != nil {
				return addr.String()
			}
			addr = hop
			if !isTrusted(hop, trusted) {
				return hop.String()
			}
		}
	}
	return addr.String()
}

// parseHop reads one X-Forwarded-For entry; some proxies add a port or brackets.
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap(), nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
