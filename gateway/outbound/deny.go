package outbound

import (
	"fmt"
	"net/netip"
	"strings"
)

// DefaultDeny is GATEHOUSE_UPSTREAM_DENY when unset: the cloud metadata
// services (IPv4 link-local, AWS's IPv6 address, Google's name), which hand
// out credentials to whoever can reach them.
const DefaultDeny = "169.254.0.0/16,fd00:ec2::254/128,metadata.google.internal"

// Deny lists the upstream addresses a connection may not reach
// (GATEHOUSE_UPSTREAM_DENY): CIDRs, single addresses and host names. The
// API refuses a baseUrl naming or resolving to one (handlers); Dialer
// refuses to connect to one, so a name that resolves there later is refused
// at dial time. The zero value denies nothing.
type Deny struct {
	prefixes []netip.Prefix
	names    map[string]bool // lower case, no trailing dot
}

// ParseDeny reads a comma-separated list of CIDRs, addresses and host
// names; "none" denies nothing.
func ParseDeny(s string) (Deny, error) {
	d := Deny{names: map[string]bool{}}
	if strings.TrimSpace(s) == "none" {
		return d, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case strings.Contains(item, "/"):
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return Deny{}, fmt.Errorf("upstream deny list: %q is not a CIDR", item)
			}
			d.prefixes = append(d.prefixes, p.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(item, "[]")); err == nil {
				d.prefixes = append(d.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			name := strings.TrimSuffix(strings.ToLower(item), ".")
			if strings.ContainsAny(name, " /:@") {
				return Deny{}, fmt.Errorf("upstream deny list: %q is not a CIDR, an address or a host name", item)
			}
			d.names[name] = true
		}
	}
	d.coverUnspecified()
	return d, nil
}

// unspecified are the addresses that reach the local host as loopback does: a
// connect to 0.0.0.0 (any of 0.0.0.0/8 on Linux) or to :: goes to the machine
// itself. IPv4-mapped forms (::ffff:0.0.0.0) are unmapped before the check.
var unspecified = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128")}

// coverUnspecified adds the unspecified addresses when an entry covers loopback
// (127.0.0.1 or ::1): denying loopback must not leave the other way to it open.
func (d *Deny) coverUnspecified() {
	loopback := false
	for _, p := range d.prefixes {
		if p.Contains(netip.MustParseAddr("127.0.0.1")) || p.Contains(netip.IPv6Loopback()) {
			loopback = true
			break
		}
	}
	if loopback {
		d.prefixes = append(d.prefixes, unspecified...)
	}
}

// Empty reports whether d denies nothing.
func (d Deny) Empty() bool { return len(d.prefixes) == 0 && len(d.names) == 0 }

// DeniesAddr reports whether a is in a denied range.
func (d Deny) DeniesAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range d.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// DeniesHost reports whether host (a name or an address literal, without
// port) is denied by name or as an address; it does not resolve names.
func (d Deny) DeniesHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return d.DeniesAddr(a)
	}
	return d.names[host]
}
