package ratelimit

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestBlockBudget(t *testing.T) {
	for code, want := range map[string][2]string{
		CodeRPD: {live.BudgetRPD, "requests per day (rpd)"},
		CodeTPD: {live.BudgetTPD, "tokens per day (tpd)"},
		CodeTPM: {live.BudgetTPM, "tokens per minute (tpm)"},
	} {
		name, words := Block{Code: code}.Budget()
		if name != want[0] || words != want[1] {
			t.Errorf("%s: %q, %q; want %q, %q", code, name, words, want[0], want[1])
		}
	}
}
