package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDashAdaptiveAndShadowFields saves the Advanced section's adaptive checkbox and
// shadow caps: a form that shows them sets and clears them (an unchecked box sends
// only its hidden "false"), a form that does not show them leaves them as they are,
// and bad input comes back beside its field with nothing written.
func TestDashAdaptiveAndShadowFields(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{"maxConcurrent":8}`)
	stored := func() (map[string]any, int64) {
		t.Helper()
		got, err := d.store.GetConnection(t.Context(), conn.ID)
		if err != nil {
			t.Fatal(err)
		}
		var o map[string]any
		if err := json.Unmarshal(got.RateLimitOverrides, &o); err != nil {
			t.Fatal(err)
		}
		return o, got.Version
	}
	version := func(v int64) []string { return []string{strconv.FormatInt(v, 10)} }

	d.post(t, c, "/connections/"+conn.ID, url.Values{
		"version": version(conn.Version), "adaptive": {"false", "true"},
		"shadow.maxConcurrent": {"2"}, "shadow.modelConcurrency": {"glm-5=1"},
	}).want(t, http.StatusSeeOther)
	o, v := stored()
	want := map[string]any{"maxConcurrent": 8.0, "adaptive": true, "shadow": map[string]any{"maxConcurrent": 2.0, "modelConcurrency": map[string]any{"glm-5": 1.0}}}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Fatalf("stored overrides after save mismatch (-want +got):\n%s", diff)
	}

	res := d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK)
	if _, ok := res.testid("field-adaptive").Attr("checked"); !ok {
		t.Error("adaptive box not checked on the edit page")
	}
	if got := res.testid("field-shadow.modelConcurrency").Text(); got != "glm-5=1" {
		t.Errorf("shadow textarea = %q, want glm-5=1", got)
	}

	// A form without the fields (a script, an older page) changes none of them.
	d.post(t, c, "/connections/"+conn.ID, url.Values{"version": version(v), "rpm": {"60"}}).want(t, http.StatusSeeOther)
	o, v = stored()
	want["rpm"] = 60.0
	if diff := cmp.Diff(want, o); diff != "" {
		t.Fatalf("a form without the fields changed them (-want +got):\n%s", diff)
	}

	// Bad input: each error beside its field, nothing written.
	res = d.post(t, c, "/connections/"+conn.ID, url.Values{
		"version": version(v), "maxConcurrent": {""}, "adaptive": {"false", "true"},
		"shadow.modelConcurrency": {"glm-5=0"},
	}).want(t, http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"needs a max concurrent of 1 or more (the learned cap stays between 1 and it)"}, texts(res.testid("error-adaptive").Find("li"))); diff != "" {
		t.Errorf("adaptive error mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`line 1: "glm-5=0": cap must be a whole number from 1 to 10000`}, texts(res.testid("error-shadow.modelConcurrency").Find("li"))); diff != "" {
		t.Errorf("shadow textarea error mismatch (-want +got):\n%s", diff)
	}
	if o2, v2 := stored(); v2 != v || !cmp.Equal(want, o2) {
		t.Errorf("a refused form was written: version %d → %d, %v", v, v2, o2)
	}

	// Unchecked box and blank shadow fields clear them.
	d.post(t, c, "/connections/"+conn.ID, url.Values{
		"version": version(v), "adaptive": {"false"}, "shadow.maxConcurrent": {""}, "shadow.modelConcurrency": {""},
	}).want(t, http.StatusSeeOther)
	o, _ = stored()
	if diff := cmp.Diff(map[string]any{"maxConcurrent": 8.0, "rpm": 60.0}, o); diff != "" {
		t.Errorf("clearing mismatch (-want +got):\n%s", diff)
	}
}
