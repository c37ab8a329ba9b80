package outbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestDialerDeny: the dialer resolves names itself (here through its
// Lookup seam, no DNS), leaves out denied addresses and connects to an
// allowed one; a denied name, a denied literal, or a name whose every
// address is denied is a *DeniedError and no connection.
func TestDialerDeny(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	deny, err := ParseDeny("169.254.0.0/16,fd00:ec2::254/128,metadata.google.internal")
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string][]netip.Addr{
		"mixed.test": {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
		"meta.test":  {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254")},
	}
	var lookups atomic.Int64
	d := &Dialer{Deny: deny, Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		return zones[host], nil
	}}
	c, err := d.DialContext(t.Context(), "tcp", "mixed.test:"+port)
	if err != nil {
		t.Fatalf("mixed.test: %v, want a connection to its allowed address", err)
	}
	_ = c.Close()
	for _, addr := range []string{"meta.test:" + port, "169.254.169.254:80", "[fd00:ec2::254]:80", "Metadata.Google.Internal.:80"} {
		_, err := d.DialContext(t.Context(), "tcp", addr)
		var de *DeniedError
		if !errors.As(err, &de) || !IsDenied(err) {
			t.Errorf("%s: %v, want a DeniedError", addr, err)
		}
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("%d lookups, want 2 (literals and denied names are not looked up)", n)
	}
	if n := accepted.Load(); n > 1 {
		t.Errorf("%d connections accepted, want at most the one allowed", n)
	}
	// No deny list: a plain dial.
	var none *Dialer
	if c, err := none.DialContext(t.Context(), "tcp", "127.0.0.1:"+port); err != nil {
		t.Errorf("nil dialer: %v", err)
	} else {
		_ = c.Close()
	}
}

// TestNewDialsThroughItsDialer: both upstream clients New makes dial
// through the Dialer they are given, so a denied address is refused by
// either; an unknown name is the default, fasthttp.
func TestNewDialsThroughItsDialer(t *testing.T) {
	t.Parallel()
	deny, err := ParseDeny("169.254.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	d := &Dialer{Deny: deny}
	for _, name := range []string{NetHTTP, FastHTTP, ""} {
		c := New(name, d)
		if _, fast := c.(*FastTransport); fast != (name != NetHTTP) {
			t.Errorf("New(%q) = %T", name, c)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://169.254.169.254/latest/meta-data", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if !IsDenied(err) {
			t.Errorf("New(%q): a request to a denied address: %v, want a DeniedError", name, err)
		}
		c.CloseIdleConnections()
	}
}
