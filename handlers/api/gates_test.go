package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
)

// TestGatesJSON: GET /api/v1/gates marshals the live view in the API's shape, byte
// for byte as before the live view moved to gateway/live — no identity fields, no
// wait histogram and no connection provider on the wire, waits in whole
// milliseconds, until null when the state has no end, budgets and lists never null.
func TestGatesJSON(t *testing.T) {
	t.Parallel()
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	reset := time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		snap live.Snapshot
		want string
	}{
		{
			name: "every field",
			snap: live.Snapshot{
				LoadedAt: until,
				Gates: []live.Gate{
					{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Provider: "zai", Cap: 4, EffectiveCap: 4, InFlight: 1, Queued: 2,
						Admitted: 7, Timeouts: 1, QueueFull: 2, Cancels: 3, WaitTotal: 12*time.Millisecond + 900*time.Microsecond, Waits: live.WaitHistogram{0: 7},
						QueuedByClient: map[string]int{"k1": 1, "": 1}, QueuedByPriority: map[string]int{"interactive": 1, "batch": 1}},
					{Key: "global", Level: live.LevelGlobal},
					{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 8, EffectiveCap: 3, Adaptive: true, InFlight: 3},
					{Key: "shadow:connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 2, EffectiveCap: 2, Shadow: true,
						InFlight: 1, WouldQueue: 5, PeakInFlight: 6, ShadowSince: until},
				},
				Connections: []live.Connection{
					{ID: "c1", Name: "one", Provider: "zai", Health: live.HealthCooling, Until: until, Reason: "upstream 429",
						Budgets: map[string]live.Budget{live.BudgetRPD: {Limit: 100, Remaining: 40, ResetAt: reset}, live.BudgetTPM: {Limit: 10, Remaining: -3, ResetAt: reset}},
						Windows: []live.Window{{Name: "5h", Used: 0.92, ResetsAt: reset}, {Name: "primary", Used: 0.5}}},
					{ID: "c2", Name: "two", Health: live.HealthOK},
				},
				Cluster: &live.Cluster{Mode: live.ClusterFailOpen, ReplicaID: "r-1", Replicas: 2, Degraded: true},
				Clients: []live.Client{{ID: "k1", Name: "agents", Weight: 3, Cap: 2, Priority: "batch", InFlight: 2, Queued: 5,
					QueuedByPriority: map[string]int{"batch": 5}, Admitted: 40, Timeouts: 1}},
			},
			want: `{"gates":[{"key":"connection:c1","level":"connection","cap":4,"effectiveCap":4,"inFlight":1,"queued":2,"admitted":7,"timeouts":1,"queueFull":2,"cancels":3,"waitMsTotal":12,"queuedByClient":{"":1,"k1":1},"queuedByPriority":{"batch":1,"interactive":1}},` +
				`{"key":"global","level":"global","cap":0,"effectiveCap":0,"inFlight":0,"queued":0,"admitted":0,"timeouts":0,"queueFull":0,"cancels":0,"waitMsTotal":0},` +
				`{"key":"model:c1:glm-5","level":"model","cap":8,"effectiveCap":3,"adaptive":true,"inFlight":3,"queued":0,"admitted":0,"timeouts":0,"queueFull":0,"cancels":0,"waitMsTotal":0},` +
				`{"key":"shadow:connection:c1","level":"connection","cap":2,"effectiveCap":2,"shadow":true,"wouldQueue":5,"peakInFlight":6,"shadowSince":"2030-01-02T03:04:05Z","inFlight":1,"queued":0,"admitted":0,"timeouts":0,"queueFull":0,"cancels":0,"waitMsTotal":0}],` +
				`"connections":[{"id":"c1","name":"one","health":"cooling","until":"2030-01-02T03:04:05Z","reason":"upstream 429","budgets":{"rpd":{"limit":100,"remaining":40,"resetAt":"2030-01-03T00:00:00Z"},"tpm":{"limit":10,"remaining":-3,"resetAt":"2030-01-03T00:00:00Z"}},` +
				`"windows":[{"name":"5h","used":0.92,"resetsAt":"2030-01-03T00:00:00Z"},{"name":"primary","used":0.5,"resetsAt":null}]},` +
				`{"id":"c2","name":"two","health":"ok","until":null,"budgets":{},"windows":[]}],` +
				`"cluster":{"mode":"fail-open","replicaId":"r-1","replicas":2,"degraded":true},` +
				`"clients":[{"id":"k1","name":"agents","weight":3,"cap":2,"priority":"batch","inFlight":2,"queued":5,"queuedByPriority":{"batch":5},"admitted":40,"timeouts":1}]}` + "\n",
		},
		{name: "nothing yet", want: `{"gates":[],"connections":[],"clients":[]}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := New(httpkit.NewCore(httpkit.Deps{Gates: snapshotGates(tt.snap)}))
			rec := httptest.NewRecorder()
			if err := s.GetGates(rec, httptest.NewRequest(http.MethodGet, "/api/v1/gates", nil)); err != nil {
				t.Fatalf("getGates: %v", err)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	t.Run("no gateway", func(t *testing.T) {
		t.Parallel()
		rec := httptest.NewRecorder()
		if err := New(httpkit.NewCore(httpkit.Deps{})).GetGates(rec, httptest.NewRequest(http.MethodGet, "/api/v1/gates", nil)); err != nil {
			t.Fatalf("getGates: %v", err)
		}
		if got, want := rec.Body.String(), `{"gates":[],"connections":[],"clients":[]}`+"\n"; got != want {
			t.Errorf("body %s, want %s", got, want)
		}
	})
}

// snapshotGates is a GateSource that always reports one snapshot.
type snapshotGates live.Snapshot

func (g snapshotGates) Snapshot() live.Snapshot                { return live.Snapshot(g) }
func (snapshotGates) ResetHealth(context.Context, string) bool { return true }
