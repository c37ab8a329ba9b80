package store_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// A request that failed over keeps every attempt and the upstream's message:
// through the writer's COPY, read back by GetRequest and ListRequests.
func TestRequestLogKeepsAttemptsAndUpstreamError(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	l := s.NewRequestLog(store.RequestLogOptions{Batch: 10, Interval: 50 * time.Millisecond})
	stop := runLog(t, l)
	defer stop()

	connA, connB := "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
	at := time.Now().UTC().Truncate(time.Second)
	failedOver := store.RequestRow{
		StartedAt: at, ConnectionID: connB, ConnectionName: "b-backup", Provider: "zai", Model: "glm-4.7",
		UpstreamModel: "glm-4.7", Route: "chat", Status: 200, Attempts: 2, TTFTMs: -1,
		AttemptsDetail: []store.RequestAttempt{
			{ConnectionID: connA, ConnectionName: `a "main" \ one`, Status: 500, Ms: 12, Code: "UPSTREAM_UNAVAILABLE"},
			{ConnectionID: connB, ConnectionName: "b-backup", Status: 200, Ms: 30},
		},
		// The writer scrubs what a caller left in: a bearer token never reaches the table.
		UpstreamError: `{"error":{"message":"overloaded <b>now</b>","auth":"Bearer sk-live-0123456789abcdef"}}`,
	}
	plain := store.RequestRow{StartedAt: at.Add(time.Second), ConnectionID: connA, ConnectionName: "a",
		Model: "glm-4.7", Route: "chat", Status: 200, Attempts: 1, TTFTMs: -1}
	l.Add(&failedOver)
	l.Add(&plain)
	waitWritten(t, l, 2)

	rows, _, err := s.ListRequests(t.Context(), store.RequestFilter{Limit: 10})
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListRequests = %d rows, %v", len(rows), err)
	}
	if rows[0].AttemptsDetail != nil || rows[0].UpstreamError != "" {
		t.Errorf("a request served at once: attempts %v, error %q; want none kept", rows[0].AttemptsDetail, rows[0].UpstreamError)
	}
	got, err := s.GetRequest(t.Context(), rows[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.AttemptsDetail, failedOver.AttemptsDetail) {
		t.Errorf("attempts = %+v, want %+v", got.AttemptsDetail, failedOver.AttemptsDetail)
	}
	if strings.Contains(got.UpstreamError, "sk-live") || !strings.Contains(got.UpstreamError, "overloaded <b>now</b>") {
		t.Errorf("upstream error = %q, want the message without the token", got.UpstreamError)
	}
}

// A key's own refusal after an attempt, and a client that hung up, are not
// upstream failures of the connection; an upstream 5xx or 429 is.
func TestRecentTrafficCountsOnlyUpstreamFailures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	conn := "33333333-3333-4333-8333-333333333333"
	at := time.Now().UTC().Add(-10 * time.Second)
	row := func(status int, code string) store.RequestRow {
		return store.RequestRow{StartedAt: at, ConnectionID: conn, ConnectionName: "a", Route: "chat",
			Status: status, Code: code, Attempts: 1, TTFTMs: -1}
	}
	keyRefusal := row(429, "RATE_LIMIT_RPM")
	keyRefusal.Gate = "key-rpm:11111111-1111-4111-8111-111111111111"
	rows := []store.RequestRow{
		keyRefusal, row(499, "CLIENT_GONE"), row(429, "UPSTREAM_COOLDOWN"),
		row(500, "UPSTREAM_UNAVAILABLE"), row(502, ""),
	}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	tr, err := s.RecentTraffic(t.Context(), at.Add(-time.Minute), at.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var failures int64
	for _, r := range tr {
		failures += r.UpstreamFailures
		if r.Code == "RATE_LIMIT_RPM" && r.ConnectionID != "" {
			t.Errorf("the key's own refusal is counted on connection %s", r.ConnectionID)
		}
	}
	if failures != 3 {
		t.Errorf("upstream failures = %d, want 3 (429 UPSTREAM_COOLDOWN, 500, 502): %+v", failures, tr)
	}
}
