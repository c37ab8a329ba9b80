package handlers

import (
	"net/http"
	"net/url"
	"testing"
)

// TestGeminiConnection: apiStyle gemini is accepted over the API and from
// the dashboard's style radios, and stored as such.
func TestGeminiConnection(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	body := connectionBody("gemini-main")
	body["provider"], body["apiStyle"], body["baseUrl"] = "google", "gemini", "https://generativelanguage.googleapis.com/v1beta"
	if got := a.createConnection(t, body)["apiStyle"]; got != "gemini" {
		t.Errorf("API: apiStyle %v, want gemini", got)
	}

	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	page := d.get(t, c, "/connections/new").want(t, http.StatusOK)
	if page.testid("field-apiStyle-gemini").Length() != 1 {
		t.Fatal("no gemini style radio on the new-connection form")
	}
	d.post(t, c, "/connections/new", url.Values{
		"name": {"gem"}, "provider": {"google"}, "apiStyle": {"gemini"},
		"baseUrl": {"https://generativelanguage.googleapis.com/v1beta"}, "apiKey": {"AIza-0123456789abcdef"},
		"models": {"gemini-2.5-flash"},
	}).want(t, http.StatusSeeOther)
	conns, err := d.store.ListConnections(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || conns[0].APIStyle != "gemini" {
		t.Errorf("dashboard: stored %+v, want one gemini connection", conns)
	}
}
