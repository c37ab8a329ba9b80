package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/google/go-cmp/cmp"
)

// TestSettingsAliasesAPI: aliases over PATCH /api/v1/settings — set, one
// removed by merge patch, and an alias naming an alias refused at its path
// with nothing written.
func TestSettingsAliasesAPI(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	r := a.do(t, call{method: http.MethodPatch, path: path("settings"), contentType: httpkit.MergePatchContentType,
		body: `{"aliases":{"fast":"zai/glm-5","mini":"gpt-5-mini"}}`}).want(t, http.StatusOK)
	if diff := cmp.Diff(jsonValue(t, `{"fast":"zai/glm-5","mini":"gpt-5-mini"}`), r.json(t)["aliases"]); diff != "" {
		t.Errorf("aliases after patch (-want +got):\n%s", diff)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("settings"), invalidRequest: true,
		body: `{"aliases":{"quick":"fast","bad name":"x"}}`}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"aliases.bad name", "aliases.quick"}, fields(p)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	r = a.do(t, call{method: http.MethodPatch, path: path("settings"), contentType: httpkit.MergePatchContentType,
		body: `{"aliases":{"mini":null}}`}).want(t, http.StatusOK)
	got := r.json(t)
	if diff := cmp.Diff(jsonValue(t, `{"fast":"zai/glm-5"}`), got["aliases"]); diff != "" {
		t.Errorf("aliases after removing one (-want +got):\n%s", diff)
	}
	if got["version"] != 3.0 {
		t.Errorf("version %v, want 3 (the refused patch wrote nothing)", got["version"])
	}
}

// TestDashSettingsAliases: the /settings aliases textarea saves alias=model
// lines, shows them back sorted, and reports an alias naming an alias at
// its line, saving nothing.
func TestDashSettingsAliases(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("aliases", "mini = gpt-5-mini\nfast=zai/glm-5\n")
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	want := map[string]any{"fast": "zai/glm-5", "mini": "gpt-5-mini"}
	if diff := cmp.Diff(want, d.settings(t)["aliases"]); diff != "" {
		t.Errorf("stored aliases (-want +got):\n%s", diff)
	}

	form = formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	if got := form.Get("aliases"); got != "fast=zai/glm-5\nmini=gpt-5-mini" {
		t.Errorf("aliases textarea = %q", got)
	}
	form.Set("aliases", "fast=zai/glm-5\nquick=fast")
	res := d.post(t, c, "/settings", form).want(t, http.StatusUnprocessableEntity)
	got := texts(res.testid("error-aliases").Find("li"))
	if len(got) != 1 || !strings.HasPrefix(got[0], `line 2: "quick=fast": names the alias "fast"`) {
		t.Errorf("aliases errors %q", got)
	}
	if diff := cmp.Diff(want, d.settings(t)["aliases"]); diff != "" {
		t.Errorf("stored aliases after the refused save (-want +got):\n%s", diff)
	}
}

// TestConfigAliases: aliases travel in the config file's settings: applied,
// exported back, and an alias naming an alias refused at its path.
func TestConfigAliases(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	doc := "settings:\n  aliases:\n    fast: zai/glm-5\n"
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc, contentType: api.YAMLContentType}).want(t, http.StatusOK)
	r := a.do(t, call{method: http.MethodGet, path: path("config")}).want(t, http.StatusOK)
	var exported struct {
		Settings struct {
			Aliases map[string]string `json:"aliases"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(r.body, &exported); err != nil {
		t.Fatalf("export: %v\n%s", err, r.body)
	}
	if diff := cmp.Diff(map[string]string{"fast": "zai/glm-5"}, exported.Settings.Aliases); diff != "" {
		t.Errorf("exported aliases (-want +got):\n%s", diff)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc + "    quick: fast\n",
		contentType: api.YAMLContentType, invalidRequest: true}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"settings.aliases.quick"}, fields(p)); diff != "" {
		t.Errorf("reported fields (-want +got):\n%s", diff)
	}
}
