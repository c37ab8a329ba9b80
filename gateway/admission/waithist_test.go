package admission

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestStatsRecordWaits: every admission lands in its gates' histograms, those
// admitted at once in bucket 0, so that Waits.Count() == Admitted.
func TestStatsRecordWaits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		waits []time.Duration // one queued request each, behind an immediate one
		want  live.WaitHistogram
	}{
		{name: "none queued", want: live.WaitHistogram{}},
		{
			name:  "one of each kind",
			waits: []time.Duration{0, 500 * time.Microsecond, 3 * time.Millisecond, 1800 * time.Millisecond, time.Hour},
			// five immediate holders and the zero wait in bucket 0
			want: live.WaitHistogram{0: 6, 1: 1, 3: 1, 12: 1, 19: 1},
		},
		{
			name:  "same bucket adds up",
			waits: []time.Duration{300 * time.Millisecond, 400 * time.Millisecond, 512 * time.Millisecond},
			want:  live.WaitHistogram{0: 3, 10: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := &fakeClock{t: time.Unix(1000, 0)}
			c := New(Options{Now: clk.now})
			c.SetCaps(map[string]int{"connection:c1": 1})
			path := refs("connection:c1", "model:c1:a")
			c.mu.Lock()
			for _, d := range tt.waits {
				var holder, queued Permit
				mustSubmit(t, c, Request{Gates: path}, &holder)
				w := mustPark(t, c, Request{Gates: path}, &queued)
				clk.advance(d)
				c.release(holder.gates[:holder.n], holder.start, holder.measured)
				if w.state != stateAdmitted {
					t.Fatalf("waiter not admitted after the release")
				}
				c.collect(w, &queued)
				if queued.Waited() != d {
					t.Errorf("waited %v, want %v", queued.Waited(), d)
				}
				c.release(queued.gates[:queued.n], queued.start, queued.measured)
				c.recycle(w)
			}
			c.mu.Unlock()
			for _, key := range []string{"connection:c1", "model:c1:a"} {
				st, ok := gateOf(c, key)
				if !ok {
					if len(tt.waits) == 0 && key != "connection:c1" {
						continue // an uncapped gate nobody used
					}
					t.Fatalf("no gate %s", key)
				}
				if diff := cmp.Diff(tt.want, st.Waits); diff != "" {
					t.Errorf("%s waits mismatch (-want +got):\n%s", key, diff)
				}
				if n := st.Waits.Count(); n != st.Admitted {
					t.Errorf("%s histogram holds %d admissions, Admitted = %d", key, n, st.Admitted)
				}
			}
		})
	}
}
