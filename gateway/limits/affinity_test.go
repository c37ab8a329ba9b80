package limits

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAffinityLimits: the affinity settings and the connection overrides
// affinity and drainAtPercent are checked with their ranges and paths, and
// their defaults hold when absent.
func TestAffinityLimits(t *testing.T) {
	t.Parallel()
	_, errs := DecodeSettings([]byte(`{"affinityTtlMs":999,"maxAffinityBindings":0,"affinityMaxWaitMs":120001}`), "settings")
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"settings.affinityMaxWaitMs", "settings.affinityTtlMs", "settings.maxAffinityBindings"}, got); diff != "" {
		t.Errorf("settings errors mismatch (-want +got):\n%s", diff)
	}
	s, errs := DecodeSettings([]byte(`{"affinityTtlMs":60000,"maxAffinityBindings":10,"affinityMaxWaitMs":0}`), "settings")
	if len(errs) > 0 {
		t.Fatalf("valid settings refused: %v", errs)
	}
	if e := s.Effective(); e.AffinityTTLMs != 60000 || e.MaxAffinityBindings != 10 || e.AffinityMaxWaitMs != 0 {
		t.Errorf("Effective = %+v", e)
	}

	_, errs = DecodeOverrides([]byte(`{"affinity":"no","drainAtPercent":101}`), "rateLimitOverrides")
	got = nil
	for _, e := range errs {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"rateLimitOverrides.affinity", "rateLimitOverrides.drainAtPercent"}, got); diff != "" {
		t.Errorf("override errors mismatch (-want +got):\n%s", diff)
	}
	if _, errs := DecodeOverrides([]byte(`{"drainAtPercent":0}`), "rateLimitOverrides"); len(errs) != 1 {
		t.Errorf("drainAtPercent 0: %v, want one error", errs)
	}
	var o Overrides
	if !o.AffinityOn() || o.DrainAt() != 0.95 {
		t.Errorf("defaults: affinity %v, drain at %v; want true, 0.95", o.AffinityOn(), o.DrainAt())
	}
	o, errs = DecodeOverrides([]byte(`{"affinity":false,"drainAtPercent":90}`), "rateLimitOverrides")
	if len(errs) > 0 || o.AffinityOn() || o.DrainAt() != 0.9 {
		t.Errorf("affinity false, drain 90: %+v %v", o, errs)
	}

	// The dashboard's checkbox: unticked (only the hidden "false") stores
	// false; ticked removes the key (on is the default).
	off, errs := ApplyForm(Overrides{}, url.Values{"affinity": {"false"}, "drainAtPercent": {"80"}}, "rateLimitOverrides")
	if len(errs) > 0 || off.Affinity == nil || *off.Affinity || *off.DrainAtPercent != 80 {
		t.Errorf("form unticked: %+v %v", off, errs)
	}
	on, errs := ApplyForm(off, url.Values{"affinity": {"false", "true"}, "drainAtPercent": {""}}, "rateLimitOverrides")
	if len(errs) > 0 || on.Affinity != nil || on.DrainAtPercent != nil {
		t.Errorf("form ticked, drain blank: %+v %v", on, errs)
	}
}
