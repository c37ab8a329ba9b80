package handlers

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDashSettingsPrices: the /settings prices textarea saves one "pattern
// input output cachedInput cacheWrite" a line, shows them back sorted with
// "-" for a price not set, keeps an unchanged page's save a no-op for the
// prices, and reports every bad line with its number in the catalog's words
// saving nothing.
func TestDashSettingsPrices(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("prices", "zai/glm-5 2 8\nanthropic/*  3 15 0.3 3.75\n")
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	want := map[string]any{
		"anthropic/*": map[string]any{"input": 3.0, "output": 15.0, "cachedInput": 0.3, "cacheWrite": 3.75},
		"zai/glm-5":   map[string]any{"input": 2.0, "output": 8.0},
	}
	if diff := cmp.Diff(want, d.settings(t)["prices"]); diff != "" {
		t.Errorf("stored prices (-want +got):\n%s", diff)
	}

	form = formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	if got := form.Get("prices"); got != "anthropic/* 3 15 0.3 3.75\nzai/glm-5 2 8 - -" {
		t.Errorf("prices textarea = %q", got)
	}
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	if diff := cmp.Diff(want, d.settings(t)["prices"]); diff != "" {
		t.Errorf("prices after saving the unchanged page (-want +got):\n%s", diff)
	}

	form = formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("prices", "anthropic/* 3 15 0.3 10000.5\nzai/glm-5 2\nzai/glm-5 2 8\nbad=model 1 2")
	res := d.post(t, c, "/settings", form).want(t, http.StatusUnprocessableEntity)
	wantErrs := []string{
		`line 1: "anthropic/* 3 15 0.3 10000.5": cacheWrite must be a number of US dollars from 0 to 10000 with at most 6 decimals`,
		`line 2: "zai/glm-5 2": write a model pattern, then the input and output prices and optionally cachedInput and cacheWrite, separated by spaces (- for a price not set)`,
		`line 4: "bad=model 1 2": use provider/model, a bare model id or provider/*, 1 to 128 characters, with no spaces, '=' or ','`,
	}
	if diff := cmp.Diff(wantErrs, texts(res.testid("error-prices").Find("li"))); diff != "" {
		t.Errorf("prices errors (-want +got):\n%s", diff)
	}
	if res.testid("settings-form").Find(`textarea[name="prices"][aria-invalid="true"]`).Length() != 1 {
		t.Error("the prices textarea is not marked invalid")
	}
	if diff := cmp.Diff(want, d.settings(t)["prices"]); diff != "" {
		t.Errorf("stored prices after the refused save (-want +got):\n%s", diff)
	}
}
