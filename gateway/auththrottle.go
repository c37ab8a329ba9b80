package gateway

import (
	"net/http"
	"time"
)

// AuthThrottle counts failed client-key authentications per client address
// (DESIGN.md: 20 free failures, then 429 with Retry-After). The gateway
// asks Wait before it checks a key — a positive wait is answered 429
// AUTH_THROTTLED without checking the key and without counting — and
// reports every invalid key to Failed. A missing key is not a guess and is
// not counted. Wait is called on every request that carries a key, so it
// must be cheap when nothing is throttled. Implementations know how to find
// a request's client address (trusted proxies); cmd wires the dashboard's.
type AuthThrottle interface {
	Wait(r *http.Request) time.Duration
	Failed(r *http.Request)
}

// noThrottle is the AuthThrottle of a gateway given none.
type noThrottle struct{}

func (noThrottle) Wait(*http.Request) time.Duration { return 0 }
func (noThrottle) Failed(*http.Request)             {}
