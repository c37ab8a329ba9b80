package httpkit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name   string
		peer   string
		xff    []string
		want   string
		noList bool
	}{
		{name: "untrusted peer, header ignored", peer: "192.0.2.1:4000", xff: []string{"198.51.100.1"}, want: "192.0.2.1"},
		{name: "no list, header ignored", peer: "127.0.0.1:4000", xff: []string{"198.51.100.1"}, want: "127.0.0.1", noList: true},
		{name: "trusted peer, one hop", peer: "127.0.0.1:4000", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "rightmost untrusted wins over a forged left", peer: "127.0.0.1:4000", xff: []string{"6.6.6.6, 198.51.100.1, 10.1.2.3"}, want: "198.51.100.1"},
		{name: "several header lines", peer: "127.0.0.1:4000", xff: []string{"6.6.6.6", "198.51.100.1, 10.1.2.3"}, want: "198.51.100.1"},
		{name: "garbage left of the client is never read", peer: "127.0.0.1:4000", xff: []string{"not-an-ip, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "garbage where the client should be", peer: "127.0.0.1:4000", xff: []string{"198.51.100.1, bogus"}, want: "127.0.0.1"},
		{name: "trusted peer, no header", peer: "127.0.0.1:4000", want: "127.0.0.1"},
		{name: "all hops trusted", peer: "127.0.0.1:4000", xff: []string{"10.0.0.9, 10.0.0.8"}, want: "10.0.0.9"},
		{name: "ipv6 and port forms", peer: "[::ffff:127.0.0.1]:4000", xff: []string{"[2001:db8::1]:5555"}, want: "2001:db8::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &http.Request{RemoteAddr: tt.peer, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			list := trusted
			if tt.noList {
				list = nil
			}
			if got := clientAddr(r, list); got != tt.want {
				t.Errorf("clientAddr = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies(" 10.0.0.0/8, 192.168.1.7 ,fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	want := "[10.0.0.0/8 192.168.1.7/32 fd00::/8]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if _, err := ParseTrustedProxies("10.0.0.0/8,10.0.0.0/33"); err == nil || !strings.Contains(err.Error(), `entry 2 "10.0.0.0/33"`) {
		t.Errorf("bad CIDR: err %v, want one naming entry 2", err)
	}
}

// TestLoginThrottleBounded: however many keys attackers make up, the throttle holds
// at most 10 000, dropping the ones touched longest ago.
func TestLoginThrottleBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := NewLoginThrottle(func() time.Time { return now })
	first := th.Keys("user0@example.com", "addr-0")
	for i := range 12000 {
		th.Begin(th.Keys(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("addr-%d", i)))
		if n := th.len(); n > throttleMaxEntries {
			t.Fatalf("after %d attempts the throttle holds %d keys, want ≤ %d", i+1, n, throttleMaxEntries)
		}
		now = now.Add(time.Millisecond)
	}
	if n := th.len(); n != throttleMaxEntries {
		t.Errorf("holds %d keys, want %d", n, throttleMaxEntries)
	}
	last := th.Keys("user11999@example.com", "addr-11999")
	th.mu.Lock()
	_, firstKept := th.entries[first.pair]
	_, lastKept := th.entries[last.pair]
	th.mu.Unlock()
	if firstKept || !lastKept {
		t.Errorf("first attempt kept %v, last kept %v: want the oldest dropped, the newest kept", firstKept, lastKept)
	}
	// Keys are salted digests: another process's table cannot be matched to this one.
	if other := NewLoginThrottle(time.Now).Keys("user0@example.com", "addr-0"); other == first {
		t.Error("two throttles derive the same keys: the salt is missing")
	}
}

func TestLoginThrottlePolicy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := NewLoginThrottle(func() time.Time { return now })
	keys := th.Keys("Ada@Example.com", "192.0.2.1")
	var waits []time.Duration
	for range 8 {
		retry, _ := th.Begin(keys)
		waits = append(waits, retry)
		now = now.Add(retry) // wait it out, then fail again
	}
	want := []time.Duration{0, 0, 0, 0, 0, 30 * time.Second, 0, time.Minute}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits before each attempt mismatch (-want +got):\n%s", diff)
	}
	// Failures of the account from ever more addresses never refuse a new address,
	// they only slow its password check down, by 2 s at most.
	var delay time.Duration
	for i := range 20 {
		var retry time.Duration
		retry, delay = th.Begin(th.Keys("ada@example.com", fmt.Sprintf("198.51.100.%d", i)))
		if retry != 0 {
			t.Fatalf("new address %d answered with retry %v; the account key must never refuse", i, retry)
		}
	}
	if delay != AccountMaxDelay {
		t.Errorf("account delay after 26 failures %v, want the cap %v", delay, AccountMaxDelay)
	}
	// Everything is forgotten 15 minutes after the last failure: never a permanent lockout.
	now = now.Add(throttleForget)
	if retry, delay := th.Begin(keys); retry != 0 || delay != 0 {
		t.Errorf("after %v: retry %v delay %v, want 0", throttleForget, retry, delay)
	}
	// A good sign-in clears the account's count but not the address's.
	for range 5 {
		th.Begin(keys)
	}
	th.Succeeded(keys)
	if retry, _ := th.Begin(keys); retry != 0 {
		t.Errorf("after success: retry %v, want 0", retry)
	}
}
