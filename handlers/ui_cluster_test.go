package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
)

// TestDashOverviewCluster: the overview shows cluster mode from the gate source — the
// mode in words, the live replicas and this replica — and labels the summary's counts
// cluster-wide; /live carries the cluster object; without it, nothing of the kind shows.
func TestDashOverviewCluster(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "viewer@example.com")

	single := d.get(t, c, "/").want(t, http.StatusOK)
	if n := single.testid("cluster").Length(); n != 0 {
		t.Errorf("single-process overview shows a cluster line")
	}
	if got := single.testid("summary").Text(); strings.Contains(got, "cluster") {
		t.Errorf("single-process summary %q mentions the cluster", got)
	}

	d.gates.set(live.Snapshot{
		Gates:   []live.Gate{{Key: "global", Level: live.LevelGlobal}},
		Cluster: &live.Cluster{Mode: live.ClusterFailOpen, ReplicaID: "host-7-0a1b2c3d", Replicas: 2, Degraded: true},
	})
	ov := d.get(t, c, "/").want(t, http.StatusOK)
	line := ov.testid("cluster")
	if line.Length() != 1 {
		t.Fatalf("cluster line found %d times, want 1:\n%s", line.Length(), ov.body)
	}
	txt := strings.Join(strings.Fields(line.Text()), " ")
	for _, want := range []string{"fail-open", "2 replicas", "host-7-0a1b2c3d"} {
		if !strings.Contains(txt, want) {
			t.Errorf("cluster line %q lacks %q", txt, want)
		}
	}
	if got := ov.testid("summary").Text(); !strings.Contains(got, "in flight across the cluster") ||
		!strings.Contains(got, "queued across the cluster") {
		t.Errorf("summary %q does not label the counts cluster-wide", got)
	}

	lv := d.get(t, c, "/live").want(t, http.StatusOK)
	var v httpkit.GatesView
	if err := json.Unmarshal([]byte(lv.body), &v); err != nil {
		t.Fatalf("/live: %v", err)
	}
	if v.Cluster == nil || *v.Cluster != (httpkit.ClusterView{Mode: live.ClusterFailOpen, ReplicaID: "host-7-0a1b2c3d", Replicas: 2, Degraded: true}) {
		t.Errorf("/live cluster = %+v", v.Cluster)
	}
}
