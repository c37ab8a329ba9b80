package web

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gatehouse-dev/gatehouse/gateway/requestlog"
)

// A request refused for its model names the model asked for; a client that
// went away is the client's hang-up; a request served at once shows its one
// attempt; attempts and the upstream's message read in Portuguese too.
func TestRequestPageSaysWhy(t *testing.T) {
	notFound := RequestRow{Row: requestlog.Row{ID: "r1", Model: "gpt-9-<b>", Status: 404, Code: "MODEL_NOT_FOUND", TTFTMs: -1}}
	doc := render(t, RequestPage(testPage("en", "viewer"), notFound))
	if got := text(byTestID(t, doc, "asked-model")); got != "gpt-9-<b>" {
		t.Errorf("asked model = %q", got)
	}
	if doc.Find(`[data-testid="attempts"]`).Length() != 0 {
		t.Error("a request never dispatched lists attempts")
	}

	for _, r := range []RequestRow{
		{Row: requestlog.Row{ID: "r2", Status: 499, Code: CodeClientGone, TTFTMs: -1}},
		{Row: requestlog.Row{ID: "r3", Status: 499, TTFTMs: -1}}, // logged before the code was
	} {
		doc = render(t, RequestPage(testPage("en", "viewer"), r))
		if got := text(byTestID(t, doc, "code-explained")); !strings.HasPrefix(got, "CLIENT_GONE: The client went away") {
			t.Errorf("%s: callout = %q, want the client's hang-up", r.ID, got)
		}
	}

	served := RequestRow{Row: requestlog.Row{ID: "r4", ConnectionID: "c1", ConnectionName: "zai-main", Status: 200, Attempts: 1, UpstreamMs: 42, TTFTMs: 5}}
	doc = render(t, RequestPage(testPage("en", "viewer"), served))
	cells := doc.Find(`[data-testid="attempt"] td`).Map(func(_ int, s *goquery.Selection) string { return text(s) })
	if got := strings.Join(cells, "|"); got != "1|zai-main|200|42 ms|" {
		t.Errorf("one attempt = %q", got)
	}

	failed := RequestRow{Row: requestlog.Row{ID: "r5", ConnectionID: "c2", ConnectionName: "b", Status: 200, Attempts: 2, TTFTMs: 5,
		AttemptsDetail: []RequestAttempt{{ConnectionID: "c1", ConnectionName: "a", Status: 429, Ms: 3, Code: "UPSTREAM_COOLDOWN"},
			{ConnectionID: "c2", ConnectionName: "b", Status: 200, Ms: 40}},
		UpstreamError: `{"error":"slow down"}`}}
	doc = render(t, RequestPage(testPage("pt-BR", "viewer"), failed))
	rows := doc.Find(`[data-testid="attempt"]`)
	if rows.Length() != 2 || !strings.Contains(text(rows.First()), "O provedor limitou a taxa") {
		t.Errorf("attempts in pt-BR = %q", text(rows))
	}
	if got := text(byTestID(t, doc, "upstream-error-text")); got != `{"error":"slow down"}` {
		t.Errorf("upstream message = %q", got)
	}
}
