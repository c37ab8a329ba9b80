package handlers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestConnectionFormLayoutInBrowser: in a real Chromium at 1280 px, a connection's
// form lines up — every field's label starts at one x and every control at another,
// the Advanced section's rates included — the rates are labelled in words with their
// abbreviation (English and Portuguese), and the models show their price per million
// tokens, a model without one marked "no price".
func TestConnectionFormLayoutInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.createConnection(t, "zai-main", `{"maxConcurrent":4,"rpm":60}`)
	if _, err := d.store.UpdateSettings(t.Context(), store.ActorSystem, 0, func(store.Settings) (json.RawMessage, error) {
		return json.RawMessage(`{"prices":{"zai/glm-5":{"input":2,"output":8}}}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	type layout struct {
		LabelLefts   []float64         `json:"labelLefts"`
		ControlLefts []float64         `json:"controlLefts"`
		Fields       int               `json:"fields"`
		Labels       map[string]string `json:"labels"`
		Prices       map[string]string `json:"prices"`
	}
	read := func(lang string) layout {
		t.Helper()
		run(t, tab, "open the connection ("+lang+")", chromedp.Navigate(d.srv.URL+"/connections/"+c.ID+"?lang="+lang),
			chromedp.WaitVisible(chromedp.CSS(tid("connection-form"))),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="advanced"]').open = true`))
		return value(t, tab, "measure the form", chromedp.Evaluate[layout](`(() => {
			const uniq = xs => [...new Set(xs.map(x => Math.round(x)))];
			const fields = [...document.querySelectorAll('[data-testid="connection-form"] .field')]
				.filter(f => f.offsetParent !== null && !f.matches('fieldset.field'));
			const labels = {}, prices = {};
			for (const n of ["rpm", "rpd", "tpm", "tpd", "minTime"]) labels[n] = document.querySelector('label[for="f-' + n + '"]').textContent.trim();
			for (const li of document.querySelectorAll('[data-testid="model-price"]')) prices[li.dataset.model] = li.textContent.replace(/\s+/g, " ").trim();
			return {
				labelLefts: uniq(fields.filter(f => f.querySelector(':scope > label')).map(f => f.querySelector(':scope > label').getBoundingClientRect().left)),
				controlLefts: uniq(fields.map(f => f.querySelector(':scope > .control').getBoundingClientRect().left)),
				fields: fields.length, labels, prices,
			};
		})()`))
	}
	en := read("en")
	if en.Fields < 15 || len(en.LabelLefts) != 1 || len(en.ControlLefts) != 1 {
		t.Errorf("%d fields: labels start at %v and controls at %v, want one x each", en.Fields, en.LabelLefts, en.ControlLefts)
	}
	if diff := cmp.Diff(map[string]string{"rpm": "Requests per minute (rpm)", "rpd": "Requests per day (rpd)",
		"tpm": "Tokens per minute (tpm)", "tpd": "Tokens per day (tpd)", "minTime": "Min time between requests"}, en.Labels); diff != "" {
		t.Errorf("rate labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"glm-5": "glm-5 $2 in · $8 out", "glm-4.7": "glm-4.7 no price"}, en.Prices); diff != "" {
		t.Errorf("model prices (-want +got):\n%s", diff)
	}
	pt := read("pt-BR")
	if len(pt.LabelLefts) != 1 || len(pt.ControlLefts) != 1 {
		t.Errorf("pt-BR: labels start at %v and controls at %v, want one x each", pt.LabelLefts, pt.ControlLefts)
	}
	if pt.Labels["rpm"] != "Requisições por minuto (rpm)" || pt.Labels["tpd"] != "Tokens por dia (tpd)" || !strings.HasSuffix(pt.Prices["glm-4.7"], "sem preço") {
		t.Errorf("pt-BR labels %v, prices %v", pt.Labels, pt.Prices)
	}
}
