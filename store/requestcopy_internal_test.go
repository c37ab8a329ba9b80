package store

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The writer's encoding of a row allocates nothing (a dirty string aside): the
// request log's cost under load is the writer's (docs/BENCHMARKS.md).
func TestAppendRequestRowAllocatesNothing(t *testing.T) {
	r := RequestRow{StartedAt: time.Now(), KeyID: "11111111-1111-4111-8111-111111111111", KeyName: "team-a",
		ConnectionID: "33333333-3333-4333-8333-333333333333", ConnectionName: "zai-main", Provider: "zai",
		Model: "zai/glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: -1,
		InputTokens: 1000, OutputTokens: 500, CostMicros: 6000, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Replica: "r1"}
	buf := make([]byte, 0, 4096)
	id := newRequestUUID(r.StartedAt)
	if n := testing.AllocsPerRun(100, func() { buf = appendRequestRow(buf[:0], &id, &r) }); n != 0 {
		t.Fatalf("appendRequestRow allocates %v times per row, want 0", n)
	}
}

func TestParseUUID(t *testing.T) {
	for _, s := range []string{"11111111-1111-4111-8111-111111111111", "0192f0c1-7b2a-7def-8abc-ABCDEF012345"} {
		u, ok := parseUUID(s)
		var want pgtype.UUID
		if err := want.Scan(s); err != nil || !ok || u != want.Bytes {
			t.Errorf("parseUUID(%q) = %x, %v; want %x (%v)", s, u, ok, want.Bytes, err)
		}
	}
	for _, s := range []string{"", "not-a-uuid", "11111111111141118111111111111111", "11111111-1111-4111-8111-11111111111g"} {
		if _, ok := parseUUID(s); ok {
			t.Errorf("parseUUID(%q) ok, want not a uuid", s)
		}
	}
}

func TestNewRequestUUIDIsV7OfItsTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 5, 30, 1, 234_567_000, time.UTC)
	id := pgtype.UUID{Bytes: newRequestUUID(at), Valid: true}.String()
	if id[14] != '7' || (id[19] != '8' && id[19] != '9' && id[19] != 'a' && id[19] != 'b') {
		t.Fatalf("%s: want version 7, variant 10", id)
	}
	if got, ok := uuidV7Time(id); !ok || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("uuidV7Time(%s) = %v, %v; want %v", id, got, ok, at.Truncate(time.Millisecond))
	}
	if a, b := newRequestUUID(at), newRequestUUID(at); a == b {
		t.Fatal("two ids of one millisecond are equal")
	}
}
