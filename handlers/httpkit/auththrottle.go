package httpkit

import (
	"net/http"
	"net/netip"
	"time"
)

// AuthThrottle throttles failed bearer authentication per client address, on /v1
// (client keys, through gateway.Options.AuthThrottle), /api/v1 and /metrics (API
// tokens), as the sign-in throttle does for an address (throttle.go): 20 free
// failures, then every further attempt from that address waits a delay that doubles
// with each failure (30 s up to 15 min): an invalid key or token from it is answered
// 429 with Retry-After instead of 401; a throttled attempt is not counted, and an
// address is forgotten 15 minutes after its last failure. The key is checked first:
// a valid key or token is served at once from any address, a throttled one
// included (a fleet behind one NAT never loses every agent to one stale key), and
// only a failure consults the table. A missing or
// malformed Authorization header is not a guess and is not counted. Addresses are kept
// as salted digests, at most 10 000 of them.
type AuthThrottle struct {
	t       *LoginThrottle
	trusted []netip.Prefix
}

// NewAuthThrottle returns an AuthThrottle that finds the client address by the rules
// of GATEHOUSE_TRUSTED_PROXIES (see clientAddr); now is its clock (nil: time.Now).
func NewAuthThrottle(trusted []netip.Prefix, now func() time.Time) *AuthThrottle {
	if now == nil {
		now = time.Now
	}
	return &AuthThrottle{t: NewLoginThrottle(now), trusted: trusted}
}

// Wait returns how long r's client address must wait before its next key is
// checked; 0 when it may go on.
func (a *AuthThrottle) Wait(r *http.Request) time.Duration {
	if a.t.size.Load() == 0 {
		return 0
	}
	return a.t.wait(a.key(r), PolicyAddress)
}

// Failed counts an invalid key sent by r's client address.
func (a *AuthThrottle) Failed(r *http.Request) { a.t.fail(a.key(r)) }

func (a *AuthThrottle) key(r *http.Request) throttleKey {
	return a.t.digest("bearer", clientAddr(r, a.trusted))
}
