package web

import (
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestOverviewCluster: in cluster mode the overview names the mode in words (localised),
// the live replicas and this replica, and labels the summary's counts cluster-wide;
// outside cluster mode none of it appears.
func TestOverviewCluster(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		locale       string
		cluster      *live.Cluster
		wantMode     string
		wantTone     string
		wantReplicas string
		wantSummary  string
	}{
		{
			name: "single process", locale: "en",
			wantSummary: "Right now 3 in flight · 6 queued",
		},
		{
			name: "redis ok", locale: "en",
			cluster:  &live.Cluster{Mode: live.ClusterRedisOK, ReplicaID: "host-12-0a1b2c3d", Replicas: 3},
			wantMode: "✓ redis ok: caps shared by all replicas", wantTone: "tone-good",
			wantReplicas: "3 replicas",
			wantSummary:  "Right now 3 in flight across the cluster · 6 queued across the cluster",
		},
		{
			name: "fail-open", locale: "en",
			cluster:  &live.Cluster{Mode: live.ClusterFailOpen, ReplicaID: "host-12-0a1b2c3d", Replicas: 1},
			wantMode: "◐ Redis unreachable: each replica admits its share of every cap (fail-open)", wantTone: "tone-warn",
			wantReplicas: "1 replica",
			wantSummary:  "Right now 3 in flight across the cluster · 6 queued across the cluster",
		},
		{
			name: "fail-closed pt-BR", locale: "pt-BR",
			cluster:  &live.Cluster{Mode: live.ClusterFailClosed, ReplicaID: "host-12-0a1b2c3d", Replicas: 2},
			wantMode: "✕ Redis inacessível: recusando requisições (fail-closed)", wantTone: "tone-bad",
			wantReplicas: "2 réplicas",
			wantSummary:  "Agora 3 em andamento no cluster · 6 na fila no cluster",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := sampleOverview()
			v.Cluster = tt.cluster
			doc := render(t, OverviewPage(testPage(tt.locale, RoleViewer), v))
			if got := text(byTestID(t, doc, "summary")); !strings.HasPrefix(got, tt.wantSummary) {
				t.Errorf("summary = %q, want it to start with %q", got, tt.wantSummary)
			}
			sel := doc.Find(`[data-testid="cluster"]`)
			if tt.cluster == nil {
				if sel.Length() != 0 {
					t.Errorf("single-process overview shows a cluster line: %q", text(sel))
				}
				return
			}
			if sel.Length() != 1 {
				t.Fatalf("cluster line found %d times, want 1", sel.Length())
			}
			if got := sel.AttrOr("data-mode", ""); got != tt.cluster.Mode {
				t.Errorf("data-mode = %q, want %q", got, tt.cluster.Mode)
			}
			mode := sel.Find(`[data-testid="cluster-mode"]`)
			if got := text(mode); got != tt.wantMode {
				t.Errorf("mode = %q, want %q", got, tt.wantMode)
			}
			if !mode.HasClass(tt.wantTone) {
				t.Errorf("mode classes %q lack %s", mode.AttrOr("class", ""), tt.wantTone)
			}
			if got := text(sel.Find(`[data-testid="cluster-replicas"]`)); got != tt.wantReplicas {
				t.Errorf("replicas = %q, want %q", got, tt.wantReplicas)
			}
			if got := text(sel.Find(`[data-testid="cluster-replica"]`)); got != tt.cluster.ReplicaID {
				t.Errorf("this replica = %q, want %q", got, tt.cluster.ReplicaID)
			}
		})
	}
}

// TestBuildOverviewCluster: BuildOverview carries the cluster status through unchanged.
func TestBuildOverviewCluster(t *testing.T) {
	t.Parallel()
	c := &live.Cluster{Mode: live.ClusterRedisOK, ReplicaID: "r1", Replicas: 2}
	if got := BuildOverview(OverviewInput{Cluster: c}).Cluster; got != c {
		t.Errorf("Cluster = %v, want %v", got, c)
	}
	if got := BuildOverview(OverviewInput{}).Cluster; got != nil {
		t.Errorf("Cluster without cluster mode = %v, want nil", got)
	}
}
