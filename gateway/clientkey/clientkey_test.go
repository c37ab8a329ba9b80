package clientkey

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/metrics"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

func ptr[T any](v T) *T { return &v }

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func TestNewGateAndStoreID(t *testing.T) {
	m := metrics.New()
	plain := New(Key{ID: "k1", Name: "plain"}, nil, m.Client("plain"))
	if plain.Gate.Key != "" || plain.StoreID != "" || plain.Priority != admission.PriorityStandard {
		t.Fatalf("a key without limits: gate %q, store id %q, class %v", plain.Gate.Key, plain.StoreID, plain.Priority)
	}
	if plain.Carry == nil {
		t.Fatal("a key built without a carry has none")
	}
	capped := New(Key{ID: "k2", Limits: limits.ClientKeyLimits{MaxConcurrent: ptr(3), Priority: ptr("batch")}}, nil, m.Client("capped"))
	if capped.Gate != (admission.GateRef{Level: live.LevelKey, Key: "key:k2"}) || capped.Priority != admission.PriorityBatch {
		t.Fatalf("a capped batch key: gate %+v, class %v", capped.Gate, capped.Priority)
	}
	if capped.StoreID != "" {
		t.Fatalf("a key without rpm or tpm has store id %q", capped.StoreID)
	}
	rated := New(Key{ID: "k3", Limits: limits.ClientKeyLimits{RPM: ptr(60)}}, nil, m.Client("rated"))
	if rated.StoreID != "key:k3" || rated.Lim.Spacing != time.Second || rated.Lim.SpacingGate != "key-rpm:k3" {
		t.Fatalf("an rpm key: store id %q, spacing %v at %q", rated.StoreID, rated.Lim.Spacing, rated.Lim.SpacingGate)
	}
	if !rated.HasSignals() || plain.HasSignals() || (*State)(nil).HasSignals() {
		t.Fatal("only a key with a rate or token budget has signals to send")
	}
}

func TestApplyCarriesOverByID(t *testing.T) {
	m := metrics.New()
	carries := map[string]*Carry{}
	first := Apply([]Key{{ID: "a", Name: "A"}, {ID: "b", Name: "B"}, {ID: "", Name: "no id"}, {ID: "a", Name: "again"}},
		carries, m.Client, now)
	if len(first.Order) != 2 || first.Order[0].Name != "A" || first.Order[1].Name != "B" || len(carries) != 2 {
		t.Fatalf("first config: order %d keys, carries %d", len(first.Order), len(carries))
	}
	first.ByID["a"].Carry.InFlight.Add(2)
	first.ByID["a"].Carry.Queued[PriorityIndex(admission.PriorityBatch)].Add(1)

	second := Apply([]Key{{ID: "a", Name: "A renamed"}, {ID: "c", Name: "C"}}, carries, m.Client, now)
	a := second.ByID["a"]
	if a.Name != "A renamed" || a.Carry != first.ByID["a"].Carry || a.Carry.InFlight.Load() != 2 {
		t.Fatalf("key a's carry was not carried over: %+v", a)
	}
	if _, ok := carries["b"]; ok || len(carries) != 2 {
		t.Fatalf("a gone key's carry was kept: %v", carries)
	}
	if got := a.Carry.QueuedByPriority(); len(got) != 1 || got["batch"] != 1 || a.Carry.QueuedTotal() != 1 {
		t.Fatalf("queued by class %v, total %d", got, a.Carry.QueuedTotal())
	}
	if second.ByID["c"].Carry.QueuedByPriority() != nil {
		t.Fatal("a key with nothing waiting lists classes")
	}
}

func TestLive(t *testing.T) {
	m := metrics.New()
	set := Apply([]Key{{ID: "a", Name: "A", Limits: limits.ClientKeyLimits{MaxConcurrent: ptr(2), Weight: ptr(5)}}, {ID: "b", Name: "B"}},
		map[string]*Carry{}, m.Client, now)
	set.ByID["a"].Carry.InFlight.Add(1)
	set.ByID["b"].Carry.Queued[0].Add(3)
	got := Live(set.Order, map[string]admission.GateStats{"key:a": {Admitted: 7, Timeouts: 2}, "": {Admitted: 99}})
	if len(got) != 2 {
		t.Fatalf("%d clients", len(got))
	}
	if a := got[0]; a.Name != "A" || a.Cap != 2 || a.Weight != 5 || a.InFlight != 1 || a.Admitted != 7 || a.Timeouts != 2 {
		t.Fatalf("A: %+v", a)
	}
	if b := got[1]; b.Queued != 3 || b.QueuedByPriority["interactive"] != 3 || b.Admitted != 0 {
		t.Fatalf("B (no gate) %+v", b)
	}
}

func TestRequestPriority(t *testing.T) {
	standard := New(Key{ID: "s", Name: "std"}, nil, nil)
	for _, tc := range []struct {
		name   string
		header []string
		want   admission.Priority
		errHas string
	}{
		{"no header: the key's class", nil, admission.PriorityStandard, ""},
		{"lowered", []string{"batch"}, admission.PriorityBatch, ""},
		{"same class", []string{"standard"}, admission.PriorityStandard, ""},
		{"raised", []string{"interactive"}, admission.PriorityStandard, `above the standard class of client key "std"`},
		{"unknown", []string{"urgent"}, admission.PriorityStandard, `got "urgent"`},
		{"twice", []string{"batch", "batch"}, admission.PriorityStandard, "(once)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != nil {
				h[HeaderPriority] = tc.header
			}
			p, msg := standard.RequestPriority(h)
			if p != tc.want || (tc.errHas == "") != (msg == "") || !strings.Contains(msg, tc.errHas) {
				t.Fatalf("class %v, message %q; want %v and a message with %q", p, msg, tc.want, tc.errHas)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"Authorization": {"Bearer sk-1 "}}, "sk-1"},
		{http.Header{"Authorization": {"bEARER sk-2"}}, "sk-2"},
		{http.Header{"Authorization": {"Basic abc"}, "X-Api-Key": {" sk-3"}}, "sk-3"},
		{http.Header{"Authorization": {"Bearer"}}, ""},
		{http.Header{}, ""},
	} {
		if got := Secret(tc.h); got != tc.want {
			t.Errorf("Secret(%v) = %q, want %q", tc.h, got, tc.want)
		}
	}
}

func TestLimitsBody(t *testing.T) {
	daily := limits.Micros(10_000) // $0.01
	ks := New(Key{ID: "k", Name: "team", Limits: limits.ClientKeyLimits{TPM: ptr(int64(1000)), BudgetUSDDaily: &daily}}, nil, nil)
	ks.SetSpacing(now)
	ks.Carry.InFlight.Add(1)
	v := ks.Limits(now, ratelimitSpend(4_000))
	if v.ID != "k" || v.Name != "team" || v.Priority != "standard" || v.InFlight != 1 || v.Limits.TPM == nil {
		t.Fatalf("body %+v", v)
	}
	if b, ok := v.Budgets["tpm"]; !ok || b.Limit != 1000 || b.Remaining != 1000 {
		t.Fatalf("tpm budget %+v (present %v)", b, ok)
	}
	usd, ok := v.BudgetsUSD["budgetUsdDaily"]
	if !ok || usd.LimitUSD != 10_000 || usd.RemainingUSD != 6_000 || !usd.ResetAt.Equal(now.Truncate(24*time.Hour).Add(24*time.Hour)) {
		t.Fatalf("money budget %+v (present %v) in %v", usd, ok, v.BudgetsUSD)
	}
	plain := New(Key{ID: "p"}, nil, nil)
	if v := plain.Limits(now, ratelimitSpend(0)); v.BudgetsUSD != nil || len(v.Budgets) != 0 {
		t.Fatalf("a key without budgets: %+v", v)
	}
}

// ratelimitSpend is a spend of micros today and this month.
func ratelimitSpend(micros int64) ratelimit.Spend { return ratelimit.Spend{Day: micros, Month: micros} }
