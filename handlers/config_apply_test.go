package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/google/go-cmp/cmp"
)

// TestConfigPrune: without prune a connection or key the document leaves out stays;
// with prune it is deleted, one audit row each; a part left out of the document is
// never pruned.
func TestConfigPrune(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	configFixture(t, a)
	var doc map[string]any
	if err := json.Unmarshal(a.do(t, call{method: http.MethodGet, path: path("config")}).want(t, http.StatusOK).body, &doc); err != nil {
		t.Fatal(err)
	}
	conns := doc["connections"].([]any)
	doc["connections"] = conns[1:]                    // drops openai-backup
	doc["clientKeys"] = doc["clientKeys"].([]any)[:1] // keeps agents, drops ci
	body, _ := json.Marshal(doc)

	if p := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: body}).want(t, http.StatusOK)); p.Changed {
		t.Fatalf("without prune: plan %+v, want no change", p)
	}
	audits := auditCount(t, a)
	p := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?prune=true", body: body}).want(t, http.StatusOK))
	var got []string
	for _, ch := range p.Changes {
		got = append(got, ch.Action+" "+ch.Entity+" "+ch.Name)
	}
	if diff := cmp.Diff([]string{"delete connection openai-backup", "delete client_key ci"}, got); diff != "" {
		t.Fatalf("prune plan (-want +got):\n%s", diff)
	}
	cur, err := a.store.ReadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Connections) != 1 || cur.Connections[0].Name != "zai-main" || len(cur.ClientKeys) != 1 {
		t.Errorf("after prune: %d connections, %d keys; want zai-main and agents", len(cur.Connections), len(cur.ClientKeys))
	}
	if n := auditCount(t, a); n != audits+2 {
		t.Errorf("audit rows +%d, want +2", n-audits)
	}
	// A document without connections prunes none, even with prune.
	if p := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?prune=true",
		body: `{"clientKeys":[{"name":"agents","limits":{"models":["zai/*"],"weight":3}}]}`}).want(t, http.StatusOK)); p.Changed {
		t.Errorf("prune without a connections list: plan %+v, want no change", p)
	}
}

// TestConfigCreatesAndSecrets: a document can create a connection, change the settings
// and create a client key in one apply; the key's secret is in the applied plan only and
// works; the plan never shows an upstream key.
func TestConfigCreatesAndSecrets(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	const upstreamKey = "sk-config-created-0123456789abcdef"
	doc := `
settings:
  maxAttempts: 2
connections:
  - name: fresh
    provider: zai
    apiStyle: openai
    baseUrl: https://api.z.ai/api/paas/v4
    apiKey: ` + upstreamKey + `
    models: [glm-5]
clientKeys:
  - name: ci
`
	dry := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true", body: doc,
		contentType: api.YAMLContentType}).want(t, http.StatusOK))
	applied := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc,
		contentType: api.YAMLContentType}).want(t, http.StatusOK))
	for _, p := range []api.ConfigPlan{dry, applied} {
		var got []string
		for _, ch := range p.Changes {
			got = append(got, ch.Action+" "+ch.Entity+" "+ch.Name)
		}
		if diff := cmp.Diff([]string{"update settings ", "create connection fresh", "create client_key ci"}, got); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}
	}
	if dry.Changes[2].Secret != "" || dry.Changes[2].ID != "" {
		t.Errorf("dry run shows a secret or id: %+v", dry.Changes[2])
	}
	if diff := cmp.Diff([]api.ConfigDiffLine{{Path: "maxAttempts", Op: "changed", Before: "3", After: "2"}}, applied.Changes[0].Diff); diff != "" {
		t.Errorf("settings diff (-want +got):\n%s", diff)
	}
	secret := applied.Changes[2].Secret
	if k, err := a.store.LookupClientKey(t.Context(), secret); err != nil || k.Name != "ci" {
		t.Errorf("the created key's secret %q does not authenticate: %v", secret, err)
	}
	for _, b := range a.bodies {
		if strings.Contains(b, upstreamKey) {
			t.Errorf("a response shows the upstream key: %s", b)
		}
	}
	cfg, err := a.store.LoadGatewayConfig(t.Context())
	if err != nil || len(cfg.Connections) != 1 || cfg.Connections[0].APIKey != upstreamKey {
		t.Errorf("stored connection key wrong (%v)", err)
	}
	// Settings stored: only the key that differs from its default.
	st, _ := a.store.GetSettings(t.Context())
	if string(st.Data) != `{"maxAttempts": 2}` {
		t.Errorf("stored settings %s, want only maxAttempts", st.Data)
	}
}

// TestConfigApplyNotifiesOnce: an apply that changes three entities sends one
// notification; a dry run and a no-op send none.
func TestConfigApplyNotifiesOnce(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	changes, wait := listenChanges(t, a)
	doc := `{"settings":{"maxAttempts":2},"clientKeys":[{"name":"a"},{"name":"b"}]}`
	a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true", body: doc}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}).want(t, http.StatusOK)
	wait("apply")
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}).want(t, http.StatusOK) // no-op
	// A marker write: notifications arrive in commit order, so once its own has arrived,
	// any extra one from the applies above would be waiting in the channel.
	a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"maxAttempts":4}`}).want(t, http.StatusOK)
	wait("marker")
	if n := len(changes); n != 0 {
		t.Errorf("%d notifications more than one per apply", n)
	}
}

// TestConfigClientKeyLimitsApply: a document that changes a key's limits and enabled
// flag updates that key in place (same id and secret, version bumped, one audit row);
// a dry run shows the change field by field and writes nothing.
func TestConfigClientKeyLimitsApply(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	created := a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"team-a","limits":{"weight":1}}`}).
		want(t, http.StatusCreated).json(t)
	doc := `{"clientKeys":[{"name":"team-a","enabled":false,"limits":{"weight":3,"maxConcurrent":2,"priority":"batch"}}]}`
	dry := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true", body: doc}).want(t, http.StatusOK))
	var diff []string
	for _, ch := range dry.Changes {
		for _, d := range ch.Diff {
			diff = append(diff, ch.Action+" "+ch.Name+" "+d.Path+" "+d.Op)
		}
	}
	want := []string{"update team-a enabled changed", "update team-a limits.maxConcurrent added", "update team-a limits.priority added",
		"update team-a limits.weight changed"}
	if d := cmp.Diff(want, diff); d != "" {
		t.Errorf("dry-run plan mismatch (-want +got):\n%s", d)
	}
	if k, _ := a.store.GetClientKey(t.Context(), created["id"].(string)); k.Version != 1 {
		t.Errorf("dry run wrote: version %d", k.Version)
	}
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}).want(t, http.StatusOK)
	k, err := a.store.GetClientKey(t.Context(), created["id"].(string))
	if err != nil || k.Enabled || k.Version != 2 || !strings.Contains(string(k.Limits), `"maxConcurrent": 2`) || !strings.Contains(string(k.Limits), `"priority": "batch"`) {
		t.Errorf("key after apply = %+v (limits %s), %v; want the same key disabled with the new limits", k, k.Limits, err)
	}
	if _, err := a.store.LookupClientKey(t.Context(), created["secret"].(string)); err != nil {
		t.Errorf("the key's secret changed with its limits: %v", err)
	}
	// An unknown class is refused with its path, nothing written.
	bad := a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: `{"clientKeys":[{"name":"team-a","limits":{"priority":"urgent"}}]}`, invalidRequest: true}).want(t, http.StatusUnprocessableEntity)
	if body := string(bad.body); !strings.Contains(body, `limits.priority`) || !strings.Contains(body, "interactive, standard, batch") {
		t.Errorf("bad class: %s", body)
	}
}
