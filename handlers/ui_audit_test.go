package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"
)

// TestAuditSignInsFiltersAndPages: over real HTTP, sign-ins are audit rows — a good
// one, wrong passwords (401) and the first refused one (429; more refusals from the
// same address within a minute write no more rows) — and /audit filters them by
// actor and action, shows one entity's changes by kind, pages 50 at a time keeping
// its filters, and words a bad time filter beside its field (422).
func TestAuditSignInsFiltersAndPages(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	anon := d.client(t)
	bad := url.Values{"email": {"viewer@example.com"}, "password": {"not the password"}}
	for range 5 {
		d.post(t, anon, "/login", bad).want(t, http.StatusUnauthorized)
	}
	for range 2 {
		d.post(t, anon, "/login", bad).want(t, http.StatusTooManyRequests)
	}
	admin := d.signIn(t, "admin@example.com")
	for i := range 55 {
		d.createKey(t, fmt.Sprintf("key-%02d", i), `{}`)
	}

	// actions is each entry's line, its time (date, time of day and zone, today's)
	// written as "<time>".
	actions := func(p page) []string {
		var out []string
		p.doc.Find(`[data-testid="audit-entry"]`).Each(func(_ int, e *goquery.Selection) {
			line := strings.Join(strings.Fields(e.Find(".audit-head").Text()), " ")
			when := e.Find(`[data-testid="audit-time"]`).Text()
			if !auditTime.MatchString(when) || !strings.HasPrefix(when, time.Now().UTC().Format("2006-01-02")) {
				t.Errorf("audit time %q, want today's date, the time and the zone", when)
			}
			out = append(out, strings.Replace(line, when, "<time>", 1))
		})
		return out
	}
	viewer := actions(d.get(t, admin, "/audit?actor=viewer%40example.com").want(t, http.StatusOK))
	want := []string{"<time> viewer@example.com was refused sign-in (too many attempts) user viewer@example.com"}
	for range 5 {
		want = append(want, "<time> viewer@example.com failed to sign in user viewer@example.com")
	}
	if diff := cmp.Diff(want, viewer); diff != "" {
		t.Errorf("the viewer's audit rows mismatch (-want +got):\n%s", diff)
	}
	signIns := actions(d.get(t, admin, "/audit?action=sign_in").want(t, http.StatusOK))
	if diff := cmp.Diff([]string{"<time> admin@example.com signed in user admin@example.com"}, signIns); diff != "" {
		t.Errorf("good sign-ins mismatch (-want +got):\n%s", diff)
	}
	failed := d.get(t, admin, "/audit?action=sign_in_failed").want(t, http.StatusOK)
	if got := failed.testid("diff-line").First().Text(); !strings.Contains(got, "address") || !strings.Contains(got, "127.0.0.1") {
		t.Errorf("a failed sign-in's first line %q, want the client address", got)
	}
	if strings.Contains(failed.body, "not the password") {
		t.Error("the audit page shows a typed password")
	}

	first := d.get(t, admin, "/audit?entity=client_key").want(t, http.StatusOK)
	if n := first.testid("audit-entry").Length(); n != 50 {
		t.Fatalf("first page of client keys: %d entries, want 50", n)
	}
	older, ok := first.testid("older").Attr("href")
	if !ok || !strings.Contains(older, "entity=client_key") {
		t.Fatalf("older link %q keeps no filter", older)
	}
	second := d.get(t, admin, older).want(t, http.StatusOK)
	if got := actions(second); len(got) != 5 || !strings.Contains(got[4], "key-00") {
		t.Errorf("second page: %q, want the 5 oldest keys", got)
	}
	if second.testid("older").Length() != 0 || second.testid("newest").Length() != 1 {
		t.Error("second page: want a newest link and no older one")
	}
	if v := first.doc.Find(`[data-testid="filter-entity"] option[selected]`).AttrOr("value", ""); v != "client_key" {
		t.Errorf("entity filter shows %q selected, want client_key", v)
	}

	badTime := d.get(t, admin, "/audit?since=yesterday").want(t, http.StatusUnprocessableEntity)
	if got := badTime.testid("error-since").Text(); !strings.Contains(got, "must be a time such as") {
		t.Errorf("bad since: %q", got)
	}
}

// auditTime is an audit entry's time as the list writes it in English.
var auditTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$`)
