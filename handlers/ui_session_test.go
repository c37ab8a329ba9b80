package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui"
)

// TestDashCookieSecureBehindTLS: a request that reached Gatehouse over TLS — its own,
// or a proxy's that says so in X-Forwarded-Proto or Forwarded — gets Secure session
// and language cookies; a plain-HTTP one does not (the browser would drop them).
func TestDashCookieSecureBehindTLS(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	tests := []struct {
		name       string
		headers    []string
		wantSecure bool
	}{
		{name: "plain HTTP", wantSecure: false},
		{name: "X-Forwarded-Proto https", headers: []string{"X-Forwarded-Proto", "https"}, wantSecure: true},
		{name: "Forwarded proto=https", headers: []string{"Forwarded", `for=192.0.2.60;proto=https;by=203.0.113.43`}, wantSecure: true},
		{name: "X-Forwarded-Proto http", headers: []string{"X-Forwarded-Proto", "http"}, wantSecure: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := d.client(t)
			res := d.post(t, c, "/login?lang=en", url.Values{"email": {"admin@example.com"}, "password": {dashPassword}}, tt.headers...).
				want(t, http.StatusSeeOther)
			cookies := res.header.Values("Set-Cookie")
			for _, name := range []string{httpkit.SessionCookie, ui.LangCookie} {
				var got string
				for _, sc := range cookies {
					if strings.HasPrefix(sc, name+"=") {
						got = sc
					}
				}
				if got == "" {
					t.Fatalf("no %s cookie in %q", name, cookies)
				}
				if secure := strings.Contains(got, "; Secure"); secure != tt.wantSecure {
					t.Errorf("%s cookie %q: Secure %v, want %v", name, got, secure, tt.wantSecure)
				}
			}
		})
	}
}
