package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestDashPriorityOutOfRange posts a priority outside −1000…1000, the only bad field:
// the form comes back (422) with the error beside the priority field and what was
// typed, and nothing is written.
func TestDashPriorityOutOfRange(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{"maxConcurrent":4}`)
	tests := []struct {
		name     string
		path     string
		form     url.Values
		priority string
	}{
		{
			name: "create, too high",
			path: "/connections/new",
			form: url.Values{
				"name": {"zai-new"}, "provider": {"zai"}, "apiStyle": {"openai"},
				"baseUrl": {"https://api.z.ai/api/paas/v4"}, "apiKey": {"sk-new-0123456789"},
				"models": {"glm-5"}, "priority": {"5000"},
			},
			priority: "5000",
		},
		{
			name:     "edit, too low",
			path:     "/connections/" + conn.ID,
			form:     url.Values{"version": {strconv.FormatInt(conn.Version, 10)}, "priority": {"-1001"}},
			priority: "-1001",
		},
		{
			name:     "edit, not a number",
			path:     "/connections/" + conn.ID,
			form:     url.Values{"version": {strconv.FormatInt(conn.Version, 10)}, "priority": {"high"}},
			priority: "high",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := d.post(t, c, tt.path, tt.form).want(t, http.StatusUnprocessableEntity)
			want := []string{"must be a whole number from -1000 to 1000"}
			if diff := cmp.Diff(want, texts(res.testid("error-priority").Find("li"))); diff != "" {
				t.Errorf("error beside priority mismatch (-want +got):\n%s", diff)
			}
			if v, _ := res.testid("field-priority").Attr("value"); v != tt.priority {
				t.Errorf("typed priority not kept: %q, want %q", v, tt.priority)
			}
			if v, _ := res.testid("field-priority").Attr("aria-invalid"); v != "true" {
				t.Error("priority not marked aria-invalid")
			}
			cs, err := d.store.ListConnections(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 || cs[0].Version != conn.Version || cs[0].Priority != 0 {
				t.Errorf("a bad priority was written: %+v", cs)
			}
		})
	}
}

// TestDashAuditActor checks that dashboard writes are audited as user:<email>, the
// form docs/ARCHITECTURE.md and openapi.yaml document, and that the pages show the
// email without the prefix.
func TestDashAuditActor(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{}`)
	d.post(t, c, "/connections/"+conn.ID, url.Values{
		"version": {strconv.FormatInt(conn.Version, 10)}, "maxConcurrent": {"3"},
	}).want(t, http.StatusSeeOther)
	entries, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityConnection, EntityID: conn.ID}, 0, 1)
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit entries: %v, %v", entries, err)
	}
	if got, want := entries[0].Actor, "user:admin@example.com"; got != want {
		t.Errorf("audit actor %q, want %q", got, want)
	}
	edit := d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK)
	if got, want := texts(edit.testid("last-change")), "Last changed just now by admin@example.com (version 2)"; len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("last change line %q, want it to start with %q", got, want)
	}
	audit := d.get(t, c, "/audit").want(t, http.StatusOK)
	if got := texts(audit.testid("audit-actor").First()); len(got) != 1 || got[0] != "admin@example.com" {
		t.Errorf("audit page actor %q, want admin@example.com", got)
	}
}

// TestDashConnectionsListIsLive checks the connections list names the endpoint its
// script polls for the live in-flight and queued columns (the browser test checks
// the columns change).
func TestDashConnectionsListIsLive(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "viewer@example.com")
	d.createConnection(t, "zai-main", `{}`)
	res := d.get(t, c, "/connections").want(t, http.StatusOK)
	if got, _ := res.testid("connections").Attr("data-live-url"); got != "/live" {
		t.Errorf("connections list data-live-url %q, want /live", got)
	}
}

// TestDashConflictToggleActsOnCurrentRow: after a save loses to someone else's, the
// form keeps its old version (saving again conflicts again), but the Disable button
// on the same page carries the row's current version, so it works.
func TestDashConflictToggleActsOnCurrentRow(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{}`)
	old := strconv.FormatInt(conn.Version, 10)
	d.post(t, c, "/connections/"+conn.ID, url.Values{"version": {old}, "maxConcurrent": {"3"}}).want(t, http.StatusSeeOther)
	res := d.post(t, c, "/connections/"+conn.ID, url.Values{"version": {old}, "maxConcurrent": {"7"}}).want(t, http.StatusConflict)
	if got, _ := res.testid("connection-form").Find(`input[name="version"]`).Attr("value"); got != old {
		t.Errorf("form version %q, want the one it was loaded at (%s)", got, old)
	}
	toggle := formValues(res.testid("toggle-form"))
	d.post(t, c, "/connections/"+conn.ID+"/toggle", toggle).want(t, http.StatusSeeOther)
	got, err := d.store.GetConnection(t.Context(), conn.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Enabled {
		t.Errorf("the Disable button on the conflict page did not disable (form sent version %s)", toggle.Get("version"))
	}
}

// TestDashForbiddenPagesSayWhy: each refusal (403) says its own reason — an admin-only
// page, a viewer's write, a write from another site — in the user's language.
func TestDashForbiddenPagesSayWhy(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{}`)
	admin := d.signIn(t, "admin@example.com")
	viewer := d.signIn(t, "viewer@example.com")
	form := url.Values{"version": {strconv.FormatInt(conn.Version, 10)}}
	tests := []struct {
		name string
		res  func(t *testing.T) page
		want string
	}{
		{
			name: "viewer opens an admin page",
			res:  func(t *testing.T) page { return d.get(t, viewer, "/connections/new") },
			want: "This page is for admins.",
		},
		{
			name: "viewer posts",
			res:  func(t *testing.T) page { return d.post(t, viewer, "/connections/"+conn.ID+"/toggle", form) },
			want: "Your role can view this page but not change it.",
		},
		{
			name: "admin's browser posts from another site",
			res: func(t *testing.T) page {
				return d.post(t, admin, "/connections/"+conn.ID+"/toggle", form, "Origin", "http://evil.example")
			},
			want: "This request came from another site, so it was refused. Make the change from a Gatehouse page.",
		},
		{
			name: "from another site, in Portuguese",
			res: func(t *testing.T) page {
				return d.post(t, admin, "/connections/"+conn.ID+"/toggle", form, "Sec-Fetch-Site", "cross-site", "Accept-Language", "pt-BR")
			},
			want: "Esta requisição veio de outro site e foi recusada. Faça a alteração a partir de uma página do Gatehouse.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res(t).want(t, http.StatusForbidden)
			if diff := cmp.Diff([]string{tt.want}, texts(res.testid("error-message"))); diff != "" {
				t.Errorf("403 message mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDashSavedFlashNamesModelCaps: the flash after a save words per-model caps as
// "<model> cap", model ids with dots (glm-4.7, gpt-4.1) included.
func TestDashSavedFlashNamesModelCaps(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{"modelConcurrency":{"glm-5":1,"glm-4.7":3}}`)
	d.post(t, c, "/connections/"+conn.ID, url.Values{
		"version": {strconv.FormatInt(conn.Version, 10)}, "modelConcurrency": {"glm-5=2\nglm-4.7=2"},
	}).want(t, http.StatusSeeOther)
	res := d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK)
	want := []string{"✓ Saved zai-main: glm-5 cap 1 → 2, glm-4.7 cap 3 → 2"}
	if diff := cmp.Diff(want, texts(res.testid("flash-message"))); diff != "" {
		t.Errorf("flash mismatch (-want +got):\n%s", diff)
	}
}
