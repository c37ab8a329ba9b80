package handlers

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustDeny parses a GATEHOUSE_UPSTREAM_DENY value.
func mustDeny(t *testing.T, s string) UpstreamDeny {
	t.Helper()
	d, err := ParseUpstreamDeny(s)
	if err != nil {
		t.Fatalf("ParseUpstreamDeny(%q): %v", s, err)
	}
	return d
}

// TestBaseURLHostChangeNeedsKey (issue 24, finding 4): over the API, moving a
// connection's baseUrl to another host (or scheme or port) without apiKey in the same
// write is 422 at apiKey and changes nothing — the stored key never follows a URL to
// a new host; with apiKey, or within the same origin, it is saved.
func TestBaseURLHostChangeNeedsKey(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	c := a.createConnection(t, connectionBody("moving"))
	id := c["id"].(string)
	stored := func() (string, float64) {
		got := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK).json(t)
		return got["baseUrl"].(string), got["version"].(float64)
	}
	baseURL, version := stored()
	for _, tt := range []struct{ name, method, body string }{
		{"PATCH another host", http.MethodPatch, `{"baseUrl":"http://elsewhere.example/v1"}`},
		{"PATCH another scheme", http.MethodPatch, `{"baseUrl":"http://api.z.ai/api/paas/v4"}`},
		{"PATCH another port", http.MethodPatch, `{"baseUrl":"https://api.z.ai:8443/api/paas/v4"}`},
		{"PUT another host", http.MethodPut, `{"name":"moving","provider":"zai","apiStyle":"openai","baseUrl":"https://169.254.169.254/v1","models":["glm-5"]}`},
	} {
		p := problemOf(t, a.do(t, call{method: tt.method, path: path("connections", id), body: tt.body}), http.StatusUnprocessableEntity)
		if diff := cmp.Diff([]string{"apiKey"}, fields(p)); diff != "" {
			t.Errorf("%s: field errors mismatch (-want +got):\n%s", tt.name, diff)
		}
		if u, v := stored(); u != baseURL || v != version {
			t.Errorf("%s: stored baseUrl %q version %v, want %q %v unchanged", tt.name, u, v, baseURL, version)
		}
	}
	for _, body := range []string{
		`{"baseUrl":"https://api.z.ai/api/paas/v5"}`,     // same host, another path
		`{"baseUrl":"https://API.Z.AI:443/api/paas/v4"}`, // same origin, spelled otherwise
		`{"baseUrl":"http://elsewhere.example/v1","apiKey":"sk-new-key-0123456789abcdef"}`,
	} {
		a.do(t, call{method: http.MethodPatch, path: path("connections", id), body: body}).want(t, http.StatusOK)
	}
	if u, _ := stored(); u != "http://elsewhere.example/v1" {
		t.Errorf("baseUrl %q after the write with apiKey", u)
	}
}

// TestConfigApplyHostChangeNeedsKey: config apply keeps the same rule, at the entry's
// path, writing nothing.
func TestConfigApplyHostChangeNeedsKey(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	a.createConnection(t, connectionBody("moving"))
	before := versions(t, a)
	doc := `{"connections":[{"name":"moving","provider":"zai","apiStyle":"openai","baseUrl":"http://elsewhere.example/v1","models":["glm-5"]}]}`
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"connections[moving].apiKey"}, fields(p)); diff != "" {
		t.Errorf("field errors mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, versions(t, a)); diff != "" {
		t.Errorf("a refused document changed versions (-want +got):\n%s", diff)
	}
	withKey := `{"connections":[{"name":"moving","provider":"zai","apiStyle":"openai","baseUrl":"http://elsewhere.example/v1","apiKey":"sk-new-key-0123456789abcdef","models":["glm-5"]}]}`
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: withKey}).want(t, http.StatusOK)
}

// TestDashBaseURLHostChangeNeedsKey: the dashboard's "leave blank to keep" does not
// keep the key for another host: the form comes back 422 with the error beside apiKey.
func TestDashBaseURLHostChangeNeedsKey(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "moving", `{}`)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))
	form.Set("baseUrl", "http://elsewhere.example/v1")
	form.Set("apiKey", "")
	res := d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusUnprocessableEntity)
	if res.testid("error-apiKey").Length() != 1 {
		t.Errorf("no error beside apiKey:\n%s", res.body)
	}
	if got, err := d.store.GetConnection(t.Context(), conn.ID); err != nil || got.BaseURL != conn.BaseURL || got.Version != conn.Version {
		t.Errorf("stored %q v%d (%v), want %q v%d unchanged", got.BaseURL, got.Version, err, conn.BaseURL, conn.Version)
	}
	form.Set("apiKey", "sk-new-key-0123456789abcdef")
	d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusSeeOther)
}

// TestUpstreamDeny (issue 24, finding 4): a baseUrl that names, or resolves to, an
// address of GATEHOUSE_UPSTREAM_DENY is 422 at baseUrl, on create and on update.
func TestUpstreamDeny(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{deny: mustDeny(t, DefaultUpstreamDeny+",127.0.0.0/8,::1/128")})
	for i, base := range []string{
		"http://169.254.169.254/latest",      // the default's link-local range
		"http://[fd00:ec2::254]/latest",      // AWS's IPv6 metadata address
		"http://metadata.google.internal/v1", // by name
		"http://METADATA.google.internal./v1",
		"http://localhost:9/v1", // a name resolving into a denied range
		"http://[::ffff:127.0.0.1]/v1",
	} {
		body := connectionBody("denied-" + string(rune('a'+i)))
		body["baseUrl"] = base
		p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("connections"), body: body}), http.StatusUnprocessableEntity)
		if diff := cmp.Diff([]string{"baseUrl"}, fields(p)); diff != "" {
			t.Errorf("%s: field errors mismatch (-want +got):\n%s", base, diff)
		}
	}
	ok := connectionBody("allowed")
	ok["baseUrl"] = "http://10.1.2.3/v1"
	id := a.createConnection(t, ok)["id"].(string)
	p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("connections", id),
		body: `{"baseUrl":"http://169.254.169.254/v1","apiKey":"sk-new-key-0123456789abcdef"}`}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"baseUrl"}, fields(p)); diff != "" {
		t.Errorf("update: field errors mismatch (-want +got):\n%s", diff)
	}
}

func TestParseUpstreamDeny(t *testing.T) {
	t.Parallel()
	d := mustDeny(t, " 10.0.0.0/8, 192.0.2.7 ,Internal.Example., ")
	for host, want := range map[string]bool{
		"10.2.3.4": true, "192.0.2.7": true, "192.0.2.8": false, "internal.example": true,
		"INTERNAL.example.": true, "other.example": false, "[::ffff:10.0.0.1]": true,
	} {
		if got := d.DeniesHost(host); got != want {
			t.Errorf("DeniesHost(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "http://x/"} {
		if _, err := ParseUpstreamDeny(bad); err == nil {
			t.Errorf("ParseUpstreamDeny(%q) accepted", bad)
		}
	}
	if none := mustDeny(t, "none"); none.DeniesHost("169.254.169.254") {
		t.Error(`"none" denies the metadata address`)
	}
}

// TestUpstreamDenyLoopbackCoversUnspecified: with loopback on the deny list, a baseUrl
// on an unspecified address that reaches it (0.0.0.0/8, [::], [::ffff:0.0.0.0]) is
// 422 at baseUrl too; with loopback not listed they stay allowed.
func TestUpstreamDenyLoopbackCoversUnspecified(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{deny: mustDeny(t, DefaultUpstreamDeny+",127.0.0.0/8")})
	for i, base := range []string{"http://0.0.0.0:9/v1", "http://0.0.0.1/v1", "http://[::]:9/v1",
		"http://[::ffff:0.0.0.0]/v1", "http://[::ffff:0:0]/v1"} {
		body := connectionBody("unspecified-" + string(rune('a'+i)))
		body["baseUrl"] = base
		p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("connections"), body: body}), http.StatusUnprocessableEntity)
		if diff := cmp.Diff([]string{"baseUrl"}, fields(p)); diff != "" {
			t.Errorf("%s: field errors mismatch (-want +got):\n%s", base, diff)
		}
	}
	if d := mustDeny(t, "10.0.0.0/8"); d.DeniesHost("0.0.0.0") || d.DeniesHost("::") {
		t.Error("a deny list without loopback denies the unspecified addresses")
	}
	if d := mustDeny(t, "::1"); !d.DeniesHost("::") || !d.DeniesHost("0.0.0.0") {
		t.Error("a deny list with ::1 leaves the unspecified addresses open")
	}
}
