package handlers

import (
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestSecretPreviewsFollowOneRule: through the API, every secret's preview is the
// last four characters (after a public scheme prefix), and nothing at all for a
// secret shorter than 24 characters: a 27-character bootstrap token once showed 8
// of its characters ("dev-…4567"), a 16-character one would have shown half.
func TestSecretPreviewsFollowOneRule(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	ctx := t.Context()
	if _, err := a.store.EnsureAPIToken(ctx, "boot", "dev-bootstrap-token-1234567", store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.EnsureClientKey(ctx, "short-key", "dev-16-chars-key"); err != nil {
		t.Fatal(err)
	}
	created := a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"agents"}`}).
		want(t, http.StatusCreated).json(t)
	secret := created["secret"].(string)

	previews := func(p string) map[string]any {
		out := map[string]any{}
		for _, it := range a.do(t, call{method: http.MethodGet, path: path(p)}).want(t, http.StatusOK).json(t)["items"].([]any) {
			m := it.(map[string]any)
			out[m["name"].(string)] = m["preview"]
		}
		return out
	}
	if got := previews("api-tokens")["boot"]; got != "…4567" {
		t.Errorf("27-character bootstrap token preview = %q, want %q", got, "…4567")
	}
	keys := previews("client-keys")
	if got := keys["short-key"]; got != "" {
		t.Errorf("16-character client key preview = %q, want none", got)
	}
	if want := store.ClientKeyPrefix + "…" + secret[len(secret)-4:]; keys["agents"] != want || created["preview"] != want {
		t.Errorf("new client key preview = %q (list %q), want %q", created["preview"], keys["agents"], want)
	}

	body := connectionBody("short-upstream-key")
	body["apiKey"] = "sk-0123456789abc"
	conn := a.createConnection(t, body)
	if got := conn["apiKeyPreview"]; got != "" {
		t.Errorf("16-character upstream key preview = %q, want none", got)
	}
}
