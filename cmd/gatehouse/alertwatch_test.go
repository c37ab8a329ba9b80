package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestAlertWatch: an adaptive gate learned down to half its cap or less
// alerts capacity.learned_cut (one above half, a shadow gate and a fixed
// gate do not); request-log rows dropped within the last minute alert
// requestlog.dropped with the count, and stop alerting once a minute has
// passed without drops; Redis away alerts cluster.degraded.
func TestAlertWatch(t *testing.T) {
	t.Parallel()
	var got []alert.Event
	dropped, degraded := int64(0), false
	w := &alertWatch{
		emit: func(e alert.Event) { got = append(got, e) },
		snapshot: func() live.Snapshot {
			return live.Snapshot{Gates: []live.Gate{
				{Key: "model:c1:glm-5", Cap: 8, EffectiveCap: 4, Adaptive: true},
				{Key: "model:c1:glm-4.7", Cap: 8, EffectiveCap: 5, Adaptive: true},
				{Key: "model:c2:glm-5", Cap: 8, EffectiveCap: 2, Shadow: true, Adaptive: true},
				{Key: "conn:c3", Cap: 8, EffectiveCap: 8},
			}}
		},
		dropped:  func() int64 { return dropped },
		degraded: func() bool { return degraded },
	}
	names := func() []string {
		var out []string
		for _, e := range got {
			out = append(out, e.Name+" "+e.Subject)
		}
		got = nil
		return out
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.check(t0)
	if diff := cmp.Diff([]string{"capacity.learned_cut model:c1:glm-5"}, names()); diff != "" {
		t.Errorf("first check mismatch (-want +got):\n%s", diff)
	}
	w.snapshot = nil
	dropped, degraded = 7, true
	w.check(t0.Add(10 * time.Second))
	want := []string{"requestlog.dropped request log", "cluster.degraded redis"}
	evs := got
	if diff := cmp.Diff(want, names()); diff != "" {
		t.Errorf("drops and Redis away mismatch (-want +got):\n%s", diff)
	}
	if evs[0].Details["dropped"] != int64(7) {
		t.Errorf("dropped details = %v, want 7", evs[0].Details)
	}
	degraded = false
	w.check(t0.Add(50 * time.Second))
	if diff := cmp.Diff([]string{"requestlog.dropped request log"}, names()); diff != "" {
		t.Errorf("within the minute mismatch (-want +got):\n%s", diff)
	}
	w.check(t0.Add(80 * time.Second))
	if diff := cmp.Diff([]string(nil), names()); diff != "" {
		t.Errorf("a minute without drops mismatch (-want +got):\n%s", diff)
	}
}
