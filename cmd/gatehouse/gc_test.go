package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTuneGC is not parallel: GC settings are process-wide.
func TestTuneGC(t *testing.T) {
	type gc struct{ Percent, Limit int64 }
	read := func() gc {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return gc{Percent: int64(p), Limit: debug.SetMemoryLimit(-1)}
	}
	saved := read()
	t.Cleanup(func() {
		debug.SetGCPercent(int(saved.Percent))
		debug.SetMemoryLimit(saved.Limit)
	})
	tests := []struct {
		name string
		env  map[string]string
		want gc
	}{
		{name: "neither set", env: nil, want: gc{Percent: defaultGCPercent, Limit: defaultMemoryLimit}},
		{name: "GOGC set", env: map[string]string{"GOGC": "150"}, want: gc{Percent: 150, Limit: defaultMemoryLimit}},
		{name: "GOMEMLIMIT set", env: map[string]string{"GOMEMLIMIT": "off"}, want: gc{Percent: defaultGCPercent, Limit: math.MaxInt64}},
		{name: "both set", env: map[string]string{"GOGC": "150", "GOMEMLIMIT": "off"}, want: gc{Percent: 150, Limit: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What the runtime would have read from the environment at start.
			debug.SetGCPercent(150)
			debug.SetMemoryLimit(math.MaxInt64)
			tuneGC(func(k string) string { return tt.env[k] })
			if diff := cmp.Diff(tt.want, read()); diff != "" {
				t.Errorf("GC settings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
