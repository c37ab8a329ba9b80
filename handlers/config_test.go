package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/store"
)

// configFixture fills a test API with two connections (one with caps), settings that
// differ from the defaults in one key, and two client keys, one name given twice.
func configFixture(t *testing.T, a *testAPI) {
	t.Helper()
	main := connectionBody("zai-main")
	main["rateLimitOverrides"] = map[string]any{"maxConcurrent": 4, "modelConcurrency": map[string]int{"glm-5": 1, "glm-4.7": 3}}
	a.createConnection(t, main)
	backup := connectionBody("openai-backup")
	backup["provider"], backup["priority"], backup["enabled"] = "openai", -5, false
	a.createConnection(t, backup)
	a.do(t, call{method: http.MethodPatch, path: path("settings"),
		body: `{"defaultMaxWaitMs":45000,"providers":{"zai":{"maxConcurrent":8}}}`}).want(t, http.StatusOK)
	for _, body := range []string{`{"name":"ci","enabled":false}`, `{"name":"agents","limits":{"weight":3,"models":["zai/*"]}}`} {
		a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: body}).want(t, http.StatusCreated)
	}
}

// versions returns every connection's version by name and the settings' version.
func versions(t *testing.T, a *testAPI) map[string]int64 {
	t.Helper()
	cur, err := a.store.ReadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]int64{"settings": cur.Settings.Version}
	for _, c := range cur.Connections {
		v[c.Name] = c.Version
	}
	return v
}

// auditCount returns how many audit rows there are.
func auditCount(t *testing.T, a *testAPI) int {
	t.Helper()
	entries, err := a.store.ListAudit(t.Context(), 0, store.MaxAuditLimit)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// plan decodes a plan answer.
func planOf(t *testing.T, r response) api.ConfigPlan {
	t.Helper()
	var p api.ConfigPlan
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("plan: %v\n%s", err, r.body)
	}
	return p
}

// TestConfigExportApplyIsNoOp: an export applied to the same instance, as YAML and as
// JSON, changes nothing: an empty plan, no version bump, no audit row.
func TestConfigExportApplyIsNoOp(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	configFixture(t, a)
	before, audits := versions(t, a), auditCount(t, a)

	yamlDoc := a.do(t, call{method: http.MethodGet, path: path("config") + "?format=yaml"}).want(t, http.StatusOK)
	if ct := yamlDoc.header.Get("Content-Type"); !strings.HasPrefix(ct, api.YAMLContentType) {
		t.Fatalf("Content-Type = %q, want YAML", ct)
	}
	for _, leak := range []string{"sk-test-", "apiKey", "gh_ck_"} {
		if strings.Contains(string(yamlDoc.body), leak) {
			t.Fatalf("export contains %q:\n%s", leak, yamlDoc.body)
		}
	}
	jsonDoc := a.do(t, call{method: http.MethodGet, path: path("config")}).want(t, http.StatusOK)
	viaAccept := a.do(t, call{method: http.MethodGet, path: path("config"), header: map[string]string{"Accept": "application/yaml"}}).
		want(t, http.StatusOK)
	if string(viaAccept.body) != string(yamlDoc.body) {
		t.Errorf("Accept: application/yaml answered differently from ?format=yaml")
	}
	var doc map[string]any
	if err := json.Unmarshal(jsonDoc.body, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range doc["connections"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if want := []string{"openai-backup", "zai-main"}; !slices.Equal(names, want) {
		t.Errorf("exported connections %v, want sorted %v", names, want)
	}
	if diff := cmp.Diff([]any{
		map[string]any{"name": "agents", "enabled": true, "limits": map[string]any{"weight": 3.0, "models": []any{"zai/*"}}},
		map[string]any{"name": "ci", "enabled": false, "limits": map[string]any{}},
	}, doc["clientKeys"]); diff != "" {
		t.Errorf("exported client keys (-want +got):\n%s", diff)
	}

	for _, c := range []call{
		{method: http.MethodPost, path: path("config", "apply"), body: yamlDoc.body, contentType: api.YAMLContentType},
		{method: http.MethodPost, path: path("config", "apply"), body: jsonDoc.body},
		{method: http.MethodPost, path: path("config", "apply") + "?prune=true", body: yamlDoc.body, contentType: api.YAMLContentType},
	} {
		if p := planOf(t, a.do(t, c).want(t, http.StatusOK)); p.Changed || len(p.Changes) != 0 {
			t.Errorf("%s: plan of an export = %+v, want no change", c.path, p)
		}
	}
	if diff := cmp.Diff(before, versions(t, a)); diff != "" {
		t.Errorf("versions changed by applying an export (-before +after):\n%s", diff)
	}
	if n := auditCount(t, a); n != audits {
		t.Errorf("audit rows %d after applying an export, want %d", n, audits)
	}
	ks, err := a.store.ListClientKeys(t.Context())
	if err != nil || len(ks) != 2 {
		t.Errorf("client keys after applying with prune = %d (%v), want the 2 there were", len(ks), err)
	}
	// A second export is byte for byte the first.
	again := a.do(t, call{method: http.MethodGet, path: path("config") + "?format=yaml"}).want(t, http.StatusOK)
	if string(again.body) != string(yamlDoc.body) {
		t.Errorf("second export differs:\n%s\nfirst:\n%s", again.body, yamlDoc.body)
	}
}

// TestConfigOneCapChange: an export with one cap edited plans exactly that change
// (dry run: nothing written), then applies it with one audit row naming config:<token>.
func TestConfigOneCapChange(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	configFixture(t, a)
	exported := a.do(t, call{method: http.MethodGet, path: path("config") + "?format=yaml"}).want(t, http.StatusOK).body
	edited := strings.Replace(string(exported), "glm-5: 1", "glm-5: 2", 1)
	if edited == string(exported) {
		t.Fatalf("export has no glm-5 cap of 1:\n%s", exported)
	}
	before, audits := versions(t, a), auditCount(t, a)

	dry := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true",
		body: edited, contentType: api.YAMLContentType}).want(t, http.StatusOK))
	want := []api.ConfigPlanChange{{Entity: "connection", Action: "update", Name: "zai-main",
		Diff: []api.ConfigDiffLine{{Path: "rateLimitOverrides.modelConcurrency.glm-5", Op: "changed", Before: "1", After: "2"}}}}
	ignoreID := func(ps []api.ConfigPlanChange) []api.ConfigPlanChange {
		out := slices.Clone(ps)
		for i := range out {
			out[i].ID = ""
		}
		return out
	}
	if diff := cmp.Diff(want, ignoreID(dry.Changes)); diff != "" || !dry.Changed {
		t.Fatalf("dry-run plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, versions(t, a)); diff != "" || auditCount(t, a) != audits {
		t.Fatalf("a dry run wrote something (-before +after):\n%s", diff)
	}

	applied := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: edited, contentType: api.YAMLContentType}).want(t, http.StatusOK))
	if diff := cmp.Diff(want, ignoreID(applied.Changes)); diff != "" {
		t.Fatalf("applied plan (-want +got):\n%s", diff)
	}
	after := versions(t, a)
	if after["zai-main"] != before["zai-main"]+1 || after["openai-backup"] != before["openai-backup"] || after["settings"] != before["settings"] {
		t.Errorf("versions %v → %v, want only zai-main bumped", before, after)
	}
	entries, err := a.store.ListAudit(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || auditCount(t, a) != audits+1 {
		t.Fatalf("audit rows %d, want %d", auditCount(t, a), audits+1)
	}
	if e := entries[0]; e.Actor != "config:test-admin" || e.Action != store.ActionUpdate || e.Entity != store.EntityConnection {
		t.Errorf("audit row = %s %s %s, want config:test-admin update connection", e.Actor, e.Action, e.Entity)
	}
	// The result is the new state: a second apply is a no-op.
	if p := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true",
		body: edited, contentType: api.YAMLContentType}).want(t, http.StatusOK)); p.Changed {
		t.Errorf("plan after applying = %+v, want no change", p)
	}
}

// TestConfigBadValuesAllAtOnce: three bad values in three places are reported together
// with their paths, and nothing is written.
func TestConfigBadValuesAllAtOnce(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	configFixture(t, a)
	before, audits := versions(t, a), auditCount(t, a)
	doc := `
settings:
  maxAttempts: 0
connections:
  - name: zai-main
    provider: zai
    apiStyle: openai
    baseUrl: https://api.z.ai/api/paas/v4
    models: [glm-5, glm-4.7]
    rateLimitOverrides:
      maxConcurrent: 1e3
      modelConcurrency:
        glm-5: 1.5
  - name: new-one
    provider: zai
    apiStyle: openai
    baseUrl: https://example.com/v1
    models: [glm-5]
    priority: 5000
    apiKey: sk-new-one-0123456789
clientKeys:
  - name: fresh
`
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc,
		contentType: api.YAMLContentType, invalidRequest: true}), http.StatusUnprocessableEntity)
	want := []string{"connections[new-one].priority", "connections[zai-main].rateLimitOverrides.modelConcurrency.glm-5", "settings.maxAttempts"}
	if diff := cmp.Diff(want, fields(p)); diff != "" {
		t.Fatalf("reported fields (-want +got):\n%s\n%+v", diff, p.Errors)
	}
	if diff := cmp.Diff(before, versions(t, a)); diff != "" || auditCount(t, a) != audits {
		t.Errorf("a rejected document wrote something (-before +after):\n%s", diff)
	}
	ks, _ := a.store.ListClientKeys(t.Context())
	if slices.ContainsFunc(ks, func(k store.ClientKey) bool { return k.Name == "fresh" }) {
		t.Errorf("a rejected document created a client key")
	}
}

// TestConfigDocumentRules: unknown keys at every level, shapes, names given twice, the
// apiKey rules and the API's refusal of ${ENV_VAR}, each with its path.
func TestConfigDocumentRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	a.createConnection(t, connectionBody("zai-main"))
	conn := func(name, extra string) string {
		return `{"name":"` + name + `","provider":"zai","apiStyle":"openai","baseUrl":"https://api.z.ai/v4","models":["glm-5"]` + extra + `}`
	}
	tests := []struct {
		name string
		doc  string
		want map[string]string // field → part of its message
	}{
		{"unknown top-level key", `{"setting":{}}`, map[string]string{"setting": "unknown field"}},
		{"unknown connection key", `{"connections":[` + conn("zai-main", `,"colour":"red"`) + `]}`,
			map[string]string{"connections[zai-main].colour": "unknown field"}},
		{"unknown override key", `{"connections":[` + conn("zai-main", `,"rateLimitOverrides":{"maxConcurent":3}`) + `]}`,
			map[string]string{"connections[zai-main].rateLimitOverrides.maxConcurent": "unknown field"}},
		{"unknown settings key", `{"settings":{"maxAttempt":3}}`, map[string]string{"settings.maxAttempt": "unknown field"}},
		{"client key limits", `{"clientKeys":[{"name":"ci","enabled":"yes","limits":{"rpm":-5,"models":["a b"]}}]}`,
			map[string]string{"clientKeys[ci].limits.rpm": "must be a whole number from 0 to 1000000",
				"clientKeys[ci].limits.models.0": "provider/model", "clientKeys[ci].enabled": "true or false"}},
		{"client key bad name", `{"clientKeys":[{"name":"has space"}]}`, map[string]string{"clientKeys[0].name": "must be 1 to 64"}},
		{"client key without name", `{"clientKeys":[{}]}`, map[string]string{"clientKeys[0].name": "required"}},
		{"client key twice", `{"clientKeys":[{"name":"ci"},{"name":"ci"}]}`, map[string]string{"clientKeys[1].name": "twice"}},
		{"connection twice", `{"connections":[` + conn("zai-main", "") + `,` + conn("zai-main", "") + `]}`,
			map[string]string{"connections[1].name": "twice"}},
		{"connections not a list", `{"connections":{"zai-main":{}}}`, map[string]string{"connections": "list of connections"}},
		{"bad name by index", `{"connections":[` + conn("bad name", `,"apiKey":"sk-0123456789abcdef"`) + `]}`,
			map[string]string{"connections[0].name": "must be 1 to 64"}},
		{"new connection without key", `{"connections":[` + conn("new-one", "") + `]}`,
			map[string]string{"connections[new-one].apiKey": "required"}},
		{"env reference over the API", `{"connections":[` + conn("zai-main", `,"apiKey":"${HOME}"`) + `]}`,
			map[string]string{"connections[zai-main].apiKey": "never from the server's environment"}},
		{"half a reference", `{"connections":[` + conn("zai-main", `,"apiKey":"sk-${HOME}"`) + `]}`,
			map[string]string{"connections[zai-main].apiKey": "exactly ${ENV_VAR}"}},
		{"not an object", `[1]`, map[string]string{"": "must be a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: tt.doc, invalidRequest: true})
			p := problemOf(t, r, http.StatusUnprocessableEntity)
			got := map[string]string{}
			for _, e := range p.Errors {
				got[e.Field] = e.Message
			}
			if len(got) != len(tt.want) {
				t.Errorf("errors %v, want exactly the fields of %v", got, tt.want)
			}
			for f, msg := range tt.want {
				if !strings.Contains(got[f], msg) {
					t.Errorf("error at %q = %q, want it to say %q (all: %v)", f, got[f], msg, got)
				}
			}
		})
	}
	if strings.Contains(strings.Join(a.bodies, "\n"), "/root") {
		t.Errorf("a response carries the server's HOME")
	}
}

// TestConfigNeedsAdmin: a viewer token may neither export nor apply.
func TestConfigNeedsAdmin(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	problemOf(t, a.do(t, call{method: http.MethodGet, path: path("config"), token: a.viewer}), http.StatusForbidden)
	problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), token: a.viewer, body: `{}`}), http.StatusForbidden)
	problemOf(t, a.do(t, call{method: http.MethodGet, path: path("config") + "?format=xml", invalidRequest: true}), http.StatusBadRequest)
	problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=maybe", body: `{}`, invalidRequest: true}),
		http.StatusBadRequest)
}

// TestConfigPlanText: the terminal form of a plan uses the audit page's marks.
func TestConfigPlanText(t *testing.T) {
	t.Parallel()
	p := api.ConfigPlan{Changed: true, Changes: []api.ConfigPlanChange{
		{Entity: "settings", Action: "update", Diff: []api.ConfigDiffLine{{Path: "maxAttempts", Op: "changed", Before: "3", After: "2"}}},
		{Entity: "connection", Action: "create", Name: "n", Diff: []api.ConfigDiffLine{{Path: "apiKey", Op: "added", After: "(secret)"}}},
		{Entity: "client_key", Action: "delete", Name: "old", Diff: []api.ConfigDiffLine{{Path: "name", Op: "removed", Before: `"old"`}}},
	}}
	want := "~ settings\n    ~ maxAttempts: 3 → 2\n+ connection n\n    + apiKey: (secret)\n− client_key old\n    − name: \"old\"\n" +
		"1 to create, 1 to update, 1 to delete\n"
	if diff := cmp.Diff(want, p.Text()); diff != "" {
		t.Errorf("Text() (-want +got):\n%s", diff)
	}
	if got := (api.ConfigPlan{}).Text(); got != "no changes\n" {
		t.Errorf("empty plan Text() = %q", got)
	}
}
