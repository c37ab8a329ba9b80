package admission

import "testing"

// TestSetCapsKeepsNamedUncappedGates checks that a config reload keeps the
// counters of an uncapped gate the snapshot still names (cap 0), and drops an
// idle uncapped gate it no longer names.
func TestSetCapsKeepsNamedUncappedGates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		caps     map[string]int
		wantKept bool
	}{
		{name: "named with cap 0", caps: map[string]int{"connection:c1": 0}, wantKept: true},
		{name: "named with a negative cap", caps: map[string]int{"connection:c1": -1}, wantKept: true},
		{name: "not named", caps: map[string]int{"connection:other": 0}, wantKept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := New(Options{})
			c.SetCaps(tt.caps)
			mustAcquire(t, c, "connection:c1").Release()
			c.SetCaps(tt.caps) // a reload that changes nothing for c1
			s, ok := gateOf(c, "connection:c1")
			if ok != tt.wantKept {
				t.Fatalf("gate kept = %v, want %v", ok, tt.wantKept)
			}
			if ok && (s.Admitted != 1 || s.Cap != 0) {
				t.Errorf("after reload: admitted %d, cap %d; want 1 and 0", s.Admitted, s.Cap)
			}
		})
	}
}

// TestLevelOf: a gate key's level is the text before its first colon, which
// may be empty; a key without a colon is its own level.
func TestLevelOf(t *testing.T) {
	for key, want := range map[string]string{"connection:c1": "connection", "model:c1:m": "model", "global": "global", ":x": ""} {
		if got := LevelOf(key); got != want {
			t.Errorf("LevelOf(%q) = %q, want %q", key, got, want)
		}
	}
}
