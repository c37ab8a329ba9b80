package upstreamtest

import (
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// launchHeld starts one request per call, all held by hold, and returns a
// function that waits for them and returns their statuses.
func launchHeld(t *testing.T, ts *testServer, calls []call) func() []int {
	t.Helper()
	statuses := make([]int, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			resp, err := ts.do(t.Context(), t, c)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	return func() []int {
		wg.Wait()
		return statuses
	}
}

func TestPeakConcurrency(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	hold := make(chan struct{})
	if err := ts.SetDefault(Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	// 3 on (A, m1), 2 on (A, m2), 1 on (B, m1); one of them streams.
	var calls []call
	add := func(n int, key, model string, stream bool) {
		for range n {
			calls = append(calls, call{path: "/v1/chat/completions", key: key, body: chatBody(model, stream)})
		}
	}
	add(2, "A", "m1", false)
	add(1, "A", "m1", true)
	add(2, "A", "m2", false)
	add(1, "B", "m1", false)
	wait := launchHeld(t, ts, calls)

	if err := ts.WaitInFlight(waitCtx(t), len(calls)); err != nil {
		close(hold)
		wait()
		t.Fatal(err)
	}
	close(hold)
	statuses := wait()
	if diff := cmp.Diff([]int{200, 200, 200, 200, 200, 200}, statuses); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	if err := ts.WaitInFlight(waitCtx(t), 0); err != nil {
		t.Fatal(err)
	}

	if got := ts.Peak("A", "m1"); got != 3 {
		t.Errorf("Peak(A, m1) = %d, want 3", got)
	}
	st := ts.Stats()
	want := Stats{
		Total: Counter{Peak: 6, Requests: 6},
		ByKey: map[string]Counter{
			"A": {Peak: 5, Requests: 5},
			"B": {Peak: 1, Requests: 1},
		},
		ByModel: map[string]Counter{
			"m1": {Peak: 4, Requests: 4},
			"m2": {Peak: 2, Requests: 2},
		},
		ByKeyModel: []KeyModelCounter{
			{Key: "A", Model: "m1", Counter: Counter{Peak: 3, Requests: 3}},
			{Key: "A", Model: "m2", Counter: Counter{Peak: 2, Requests: 2}},
			{Key: "B", Model: "m1", Counter: Counter{Peak: 1, Requests: 1}},
		},
		KeysSeen: []string{"A", "B"},
	}
	// The last key per model depends on arrival order; check it separately.
	lastKeys := st.LastKeyByModel
	st.LastKeyByModel = nil
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("stats mismatch (-want +got):\n%s", diff)
	}
	if lastKeys["m2"] != "A" || (lastKeys["m1"] != "A" && lastKeys["m1"] != "B") {
		t.Errorf("last keys = %v", lastKeys)
	}
}

func TestResetKeepsInFlight(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	for range 3 {
		ts.roundTrip(t, call{path: "/v1/chat/completions", key: "old", body: chatBody("m", false)})
	}
	hold := make(chan struct{})
	if err := ts.SetKeyBehavior("held", Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	wait := launchHeld(t, ts, []call{{path: "/v1/chat/completions", key: "held", body: chatBody("m", false)}})
	if err := ts.WaitInFlight(waitCtx(t), 1); err != nil {
		close(hold)
		wait()
		t.Fatal(err)
	}
	ts.Reset()
	got := ts.Stats()
	close(hold)
	wait()
	want := Stats{
		Total:          Counter{InFlight: 1, Peak: 1},
		ByKey:          map[string]Counter{"held": {InFlight: 1, Peak: 1}},
		ByModel:        map[string]Counter{"m": {InFlight: 1, Peak: 1}},
		ByKeyModel:     []KeyModelCounter{{Key: "held", Model: "m", Counter: Counter{InFlight: 1, Peak: 1}}},
		KeysSeen:       []string{},
		LastKeyByModel: map[string]string{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats after Reset mismatch (-want +got):\n%s", diff)
	}
	if ts.SawKey("old") {
		t.Errorf("SawKey(old) after Reset = true")
	}
	if err := ts.WaitInFlight(waitCtx(t), 0); err != nil {
		t.Fatalf("in flight after the held request ended: %v", err)
	}
	if got := ts.Stats().Total; got != (Counter{Peak: 1}) {
		t.Errorf("total after the held request ended = %+v, want peak 1 and nothing in flight", got)
	}
}

func TestKeysRecorded(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.roundTrip(t, call{path: "/v1/chat/completions", key: "conn-key-1", body: chatBody("m", false)})
	ts.roundTrip(t, call{path: "/v1/messages", key: "conn-key-2", anth: true, body: chatBody("m", false)})
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{name: "bearer", key: "conn-key-1", want: true},
		{name: "x-api-key", key: "conn-key-2", want: true},
		{name: "never sent", key: "client-key", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ts.SawKey(tt.key); got != tt.want {
				t.Errorf("SawKey(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
	if k, ok := ts.LastKey("m"); !ok || k != "conn-key-2" {
		t.Errorf("LastKey(m) = %q, %v; want conn-key-2", k, ok)
	}
	if n := ts.Requests("conn-key-1", "m"); n != 1 {
		t.Errorf("Requests(conn-key-1, m) = %d, want 1", n)
	}
}

func TestArrivalsKeepsLatest(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{ArrivalsKept: 3})
	for range 5 {
		ts.roundTrip(t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})
	}
	got := ts.Arrivals("k", "m")
	if len(got) != 3 {
		t.Fatalf("kept %d arrivals, want 3", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Before(got[i-1]) {
			t.Errorf("arrivals out of order: %v", got)
		}
	}
	if ts.Arrivals("k", "other") != nil {
		t.Errorf("arrivals of an unseen pair: want nil")
	}
}

func TestStatsHTTP(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.roundTrip(t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})

	status, _, body := ts.roundTrip(t, call{method: http.MethodGet, path: "/stats"})
	if status != http.StatusOK {
		t.Fatalf("GET /stats status = %d", status)
	}
	got := decode[Stats](t, body)
	if diff := cmp.Diff(ts.Stats(), got); diff != "" {
		t.Errorf("GET /stats mismatch with Stats() (-want +got):\n%s", diff)
	}
	if got.ByKey["k"].Requests != 1 {
		t.Errorf("requests of k = %d, want 1", got.ByKey["k"].Requests)
	}

	if status, _, _ := ts.roundTrip(t, call{method: http.MethodGet, path: "/stats/reset"}); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /stats/reset status = %d, want 405", status)
	}
	if status, _, _ := ts.roundTrip(t, call{path: "/stats/reset"}); status != http.StatusNoContent {
		t.Errorf("POST /stats/reset status = %d, want 204", status)
	}
	if ts.SawKey("k") || ts.Stats().Total.Requests != 0 {
		t.Errorf("stats not reset: %+v", ts.Stats())
	}
}
