package health

import (
	"log/slog"
	"testing"
	"time"
)

// BenchmarkObservedPath measures what an adaptive connection with shadow
// caps adds to one attempt: entering and leaving its learned and shadow
// gates and counting the success. It must not allocate.
func BenchmarkObservedPath(b *testing.B) {
	l := NewLearner(time.Now, slog.New(slog.DiscardHandler))
	learned := l.Configure(map[string]LearnSpec{"connection:c": {ConnID: "c", Level: "connection", Cap: 64}, "model:c:m": {ConnID: "c", Level: "model", Cap: 64}})
	sh := NewShadows().Configure(map[string]ShadowSpec{
		"shadow:connection:c": {ConnID: "c", Cap: 4}, "shadow:model:c:m": {ConnID: "c", Model: "m", Cap: 2},
	}, time.Now())
	lp := LearnPath{learned["connection:c"], learned["model:c:m"]}
	sp := ShadowPath{sh["shadow:connection:c"], sh["shadow:model:c:m"]}
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := time.Now()
			full := lp.Enter()
			sp.Enter()
			lp.Succeeded(ctx, full)
			sp.Leave()
			lp.Leave(start)
		}
	})
}
