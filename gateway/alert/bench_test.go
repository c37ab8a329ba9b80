package alert_test

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// BenchmarkEmitInCooldown is the cost a request pays to emit an event
// that alerted already (a key past 80 % settles every request over it):
// the cooldown check, no queue, no I/O.
func BenchmarkEmitInCooldown(b *testing.B) {
	n := alert.New(b.Context(), alert.Options{})
	defer n.Close()
	n.Configure(limits.AlertWebhooks{{Name: "ops", URL: "http://192.0.2.1/hook", Format: "json",
		Events: []string{limits.AlertBudgetThreshold}}}, 0)
	e := alert.Event{Name: limits.AlertBudgetThreshold, Subject: "agent-a", Condition: "daily 80%"}
	n.Emit(e)
	b.ReportAllocs()
	for b.Loop() {
		n.Emit(e)
	}
}
