package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/store"
)

// fakeAlerts is an AlertSource over the store's deliveries whose test
// alert is claimed and at once marked delivered.
type fakeAlerts struct {
	st    *store.Store
	hooks func() limits.AlertWebhooks
}

var errFakeNoWebhook = errors.New("no webhook")

func (f fakeAlerts) RecentAlerts(ctx context.Context, limit int) ([]store.AlertDelivery, error) {
	return f.st.RecentAlerts(ctx, limit)
}

func (f fakeAlerts) TestAlert(ctx context.Context, webhook, actor string) (store.AlertDelivery, error) {
	if _, ok := f.hooks().Index(webhook); !ok {
		return store.AlertDelivery{}, errFakeNoWebhook
	}
	d, _, err := f.st.ClaimAlert(ctx, store.AlertDelivery{Event: store.AlertTestEvent, Subject: webhook, Webhook: webhook,
		Severity: "warning", Summary: "test by " + actor, CreatedAt: time.Now()}, 0)
	return d, err
}

func (f fakeAlerts) IsNoWebhook(err error) bool { return err == errFakeNoWebhook }

// storedAlerts is the webhooks as stored (secretSealed included).
func storedAlerts(t *testing.T, st *store.Store) limits.AlertWebhooks {
	t.Helper()
	cur, err := st.GetSettings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Alerts limits.AlertWebhooks `json:"alerts"`
	}
	if err := json.Unmarshal(cur.Data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Alerts
}

// TestAlertSecretWriteOnly: a webhook's secret is stored sealed (it opens
// to what was written), shown only as secretSet, kept when the webhook is
// written again without one (a secretSealed of the client's is ignored),
// and neither it nor its ciphertext appears in a response (the audit log
// included) or the log.
func TestAlertSecretWriteOnly(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	const secret = "whsec-topsecret-value-1234"
	body := `{"alerts":[{"name":"ops","url":"https://hooks.example.com/x","format":"slack","events":["budget.threshold"],"secret":"` + secret + `"}],"alertCooldownMs":60000}`
	got := a.do(t, call{method: http.MethodPatch, path: path("settings"), body: body}).want(t, http.StatusOK).json(t)
	hooks, _ := got["alerts"].([]any)
	if len(hooks) != 1 {
		t.Fatalf("alerts = %v", got["alerts"])
	}
	h := hooks[0].(map[string]any)
	if h["secretSet"] != true || h["secret"] != nil || h["secretSealed"] != nil {
		t.Errorf("webhook shown = %v, want secretSet true and no secret", h)
	}
	sealed := storedAlerts(t, a.store)[0].SecretSealed
	if plain, err := a.store.OpenAlertSecret(sealed); err != nil || plain != secret {
		t.Fatalf("stored secret opens to %q, %v", plain, err)
	}
	// Written again without a secret (and with a forged secretSealed): the stored one stays.
	body = `{"alerts":[{"name":"ops","url":"https://hooks.example.com/y","format":"json","events":["budget.threshold"],"secretSealed":"Zm9yZ2Vk","secretSet":true}]}`
	a.do(t, call{method: http.MethodPatch, path: path("settings"), body: body}).want(t, http.StatusOK)
	if now := storedAlerts(t, a.store)[0]; now.SecretSealed != sealed || now.URL != "https://hooks.example.com/y" {
		t.Errorf("after a write without secret: %+v, want the sealed secret kept", now)
	}
	// Renamed: a new webhook, without the old one's secret.
	a.do(t, call{method: http.MethodPatch, path: path("settings"), body: strings.Replace(body, `"ops"`, `"ops2"`, 1)}).want(t, http.StatusOK)
	if now := storedAlerts(t, a.store)[0]; now.SecretSealed != "" {
		t.Errorf("a renamed webhook kept the secret of another: %+v", now)
	}
	a.do(t, call{method: http.MethodGet, path: path("alerts"), token: a.viewer}).want(t, http.StatusOK)
	audit := a.do(t, call{method: http.MethodGet, path: path("audit")}).want(t, http.StatusOK)
	if !strings.Contains(string(audit.body), "(set ") {
		t.Errorf("the audit log does not mark the secret as set: %s", audit.body)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.bodies {
		if strings.Contains(b, secret) || strings.Contains(b, sealed) {
			t.Fatalf("a response holds the secret: %s", b)
		}
	}
	if strings.Contains(a.logs.String(), secret) {
		t.Error("the log holds the secret")
	}
}

// TestAlertWebhookDenied: a webhook URL naming, or resolving to, an address
// of GATEHOUSE_UPSTREAM_DENY (an IP literal, a denied name, localhost
// resolving to 127.0.0.1) is refused with 422 at alerts.<i>.url on a
// settings PATCH, and at settings.alerts.<i>.url on a config apply, over
// the API and through the config command's tool; nothing is stored, and
// the address is never dialled.
func TestAlertWebhookDenied(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer recv.Close()
	deny := mustDeny(t, "127.0.0.0/8,metadata.internal")
	a := newTestAPI(t, apiOptions{deny: deny})
	before := a.do(t, call{method: http.MethodGet, path: path("settings")}).want(t, http.StatusOK).json(t)["version"]
	hook := func(url string) string {
		return `{"name":"h","url":"` + url + `","format":"json","events":["cluster.degraded"]}`
	}
	byName := strings.Replace(recv.URL, "127.0.0.1", "localhost", 1) // resolves to a denied address
	list := `[` + hook("https://ok.example/x") + `,` + hook(recv.URL+"/hook") + `,` + hook("http://metadata.internal/") + `,` + hook(byName+"/hook") + `]`
	for _, n := range []string{`"a"`, `"b"`, `"c"`} {
		list = strings.Replace(list, `"h"`, n, 1)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"alerts":` + list + `}`}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"alerts.1.url", "alerts.2.url", "alerts.3.url"}, fields(p)); diff != "" {
		t.Errorf("field errors mismatch (-want +got):\n%s", diff)
	}
	doc := `{"settings":{"alerts":` + list + `}}`
	want := []string{"settings.alerts.1.url", "settings.alerts.2.url", "settings.alerts.3.url"}
	p = problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff(want, fields(p)); diff != "" {
		t.Errorf("config apply field errors mismatch (-want +got):\n%s", diff)
	}
	_, err := api.NewConfigTool(a.store, deny).Apply(t.Context(), "test", []byte(doc), api.ApplyOptions{})
	var fe limits.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("config command apply = %v, want field errors", err)
	}
	var got []string
	for _, e := range fe {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config command field errors mismatch (-want +got):\n%s", diff)
	}
	after := a.do(t, call{method: http.MethodGet, path: path("settings")}).want(t, http.StatusOK).json(t)
	if after["version"] != before || after["alerts"] != nil {
		t.Errorf("settings changed: version %v → %v, alerts %v", before, after["version"], after["alerts"])
	}
	if hits.Load() != 0 {
		t.Errorf("the denied address was dialled %d times", hits.Load())
	}
}

// TestListAlertsAndTest: GET /api/v1/alerts shows the webhooks (no
// secrets) and the deliveries to a viewer; a test alert is the admin's (a
// viewer gets 403), an unknown webhook 404, and the test shows in the list.
func TestListAlertsAndTest(t *testing.T) {
	t.Parallel()
	var a *testAPI
	hooks := func() limits.AlertWebhooks { return storedAlerts(t, a.store) }
	pool := &fakeAlerts{hooks: hooks}
	a = newTestAPI(t, apiOptions{alerts: pool})
	pool.st = a.store
	a.do(t, call{method: http.MethodPatch, path: path("settings"),
		body: `{"alerts":[{"name":"ops","url":"https://hooks.example.com/x","format":"json","events":["session.guard"],"secret":"s-1"}]}`}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("alerts", "ops", "test"), token: a.viewer}).want(t, http.StatusForbidden)
	a.do(t, call{method: http.MethodPost, path: path("alerts", "nope", "test")}).want(t, http.StatusNotFound)
	d := a.do(t, call{method: http.MethodPost, path: path("alerts", "ops", "test")}).want(t, http.StatusAccepted).json(t)
	if d["event"] != "test" || d["webhook"] != "ops" || d["status"] != "sending" {
		t.Errorf("test delivery = %v", d)
	}
	got := a.do(t, call{method: http.MethodGet, path: path("alerts"), token: a.viewer}).want(t, http.StatusOK).json(t)
	ws, _ := got["webhooks"].([]any)
	ds, _ := got["deliveries"].([]any)
	if len(ws) != 1 || ws[0].(map[string]any)["secretSet"] != true || len(ds) != 1 || got["alertCooldownMs"] != float64(900000) {
		t.Errorf("GET /api/v1/alerts = %v", got)
	}
}

// TestAlertSecretInConfig: an export shows no secret; applying the export
// keeps the stored secret; a secret of ${GATEHOUSE_SECRET_*} is read from
// the config command's environment, and the API (no environment) refuses
// one at settings.alerts.<i>.secret.
func TestAlertSecretInConfig(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	tool := api.NewConfigTool(a.store, UpstreamDeny{})
	env := map[string]string{"GATEHOUSE_SECRET_HOOK": "from-env-secret"}
	doc := `{"settings":{"alerts":[{"name":"ops","url":"https://hooks.example.com/x","format":"json","events":["cluster.degraded"],"secret":"${GATEHOUSE_SECRET_HOOK}"}]}}`
	if _, err := tool.Apply(t.Context(), "test", []byte(doc), api.ApplyOptions{Getenv: func(k string) string { return env[k] }}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	sealed := storedAlerts(t, a.store)[0].SecretSealed
	if plain, err := a.store.OpenAlertSecret(sealed); err != nil || plain != "from-env-secret" {
		t.Fatalf("stored secret = %q, %v", plain, err)
	}
	exported, err := tool.Export(t.Context(), "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(exported), sealed) || strings.Contains(string(exported), "from-env-secret") || !strings.Contains(string(exported), `"secretSet": true`) {
		t.Errorf("export = %s, want the webhook with secretSet and no secret", exported)
	}
	if _, err := tool.Apply(t.Context(), "test", exported, api.ApplyOptions{}); err != nil {
		t.Fatalf("apply the export: %v", err)
	}
	if now := storedAlerts(t, a.store)[0].SecretSealed; now != sealed {
		t.Error("applying the export lost the stored secret")
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"settings.alerts.0.secret"}, fields(p)); diff != "" {
		t.Errorf("field errors mismatch (-want +got):\n%s", diff)
	}
}

// TestDashSettingsKeepAlerts: saving the /settings form (which has no
// alert fields) keeps the webhooks and their sealed secret as stored.
func TestDashSettingsKeepAlerts(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	hooks := limits.AlertWebhooks{{Name: "ops", URL: "https://hooks.example.com/x", Format: "json",
		Events: []string{limits.AlertSessionGuard}, SecretSealed: d.store.SealAlertSecret("kept")}}
	data, err := json.Marshal(map[string]any{"alerts": hooks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.UpdateSettings(t.Context(), "test", 0, func(store.Settings) (json.RawMessage, error) { return data, nil }); err != nil {
		t.Fatal(err)
	}
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("maxAttempts", "2")
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	got := storedAlerts(t, d.store)
	if diff := cmp.Diff(hooks, got); diff != "" {
		t.Errorf("webhooks after a settings save (-want +got):\n%s", diff)
	}
}
