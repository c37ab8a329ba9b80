package outbound

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"time"
)

// dialTimeout bounds one dial, every address of the name together.
const dialTimeout = 10 * time.Second

// DeniedError is a dial refused because the upstream's host name, or every
// address it resolved to, is on the deny list (GATEHOUSE_UPSTREAM_DENY).
type DeniedError struct {
	Host string
	Addr netip.Addr // the denied address; invalid when the name is denied
}

func (e *DeniedError) Error() string {
	if e.Addr.IsValid() {
		return "outbound: " + e.Host + " resolves to " + e.Addr.String() + ", on the upstream deny list"
	}
	return "outbound: " + e.Host + " is on the upstream deny list"
}

// Dialer connects both upstream clients to their hosts, refusing the
// addresses of Deny at dial time: it resolves the name itself, leaves out
// denied addresses and connects to an allowed address as resolved, so the
// address checked is the address connected to (no second lookup). When
// every address is denied the dial fails with *DeniedError. With an empty
// Deny it dials as net.Dialer does.
type Dialer struct {
	Deny Deny
	// Lookup resolves a host name; nil: the system resolver. Tests set it.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// DialContext connects to addr ("host:port") over network ("tcp").
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if d == nil || (d.Deny.Empty() && d.Lookup == nil) {
		return nd.DialContext(ctx, network, addr)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, &net.AddrError{Err: "bad port", Addr: addr}
	}
	if d.Deny.DeniesHost(host) {
		return nil, &DeniedError{Host: host}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var denied netip.Addr
	allowed := addrs[:0:0]
	for _, a := range addrs {
		if d.Deny.DeniesAddr(a) {
			denied = a
		} else {
			allowed = append(allowed, a)
		}
	}
	var lastErr error
	for i, a := range allowed {
		// Each address gets its share of the time left (at least 2 s),
		// as net.Dialer gives them, so one black hole does not eat it all.
		actx, acancel := ctx, context.CancelFunc(func() {})
		if left := len(allowed) - i; left > 1 {
			dl, _ := ctx.Deadline()
			actx, acancel = context.WithTimeout(ctx, max(time.Until(dl)/time.Duration(left), 2*time.Second))
		}
		c, err := nd.DialContext(actx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		acancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	if denied.IsValid() {
		return nil, &DeniedError{Host: host, Addr: denied.Unmap()}
	}
	return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
}

// resolve is host's addresses: the literal itself, or the lookup's.
func (d *Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if d.Lookup != nil {
		return d.Lookup(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// dialTimeoutFunc is d's dial in fasthttp's DialTimeout form.
func (d *Dialer) dialTimeoutFunc(addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 || timeout > dialTimeout {
		timeout = dialTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// IsDenied reports whether err is a dial the deny list refused.
func IsDenied(err error) bool {
	var de *DeniedError
	return errors.As(err, &de)
}
