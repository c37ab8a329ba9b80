package limits

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestBudgetUSDAccepts: dollars with up to 2 decimals from 0 to 1 000 000,
// kept exactly in Micros, written back as dollars.
func TestBudgetUSDAccepts(t *testing.T) {
	for in, want := range map[string]Micros{
		`0`: 0, `0.01`: 10_000, `12.5`: 12_500_000, `1e2`: 100 * MicrosPerUSD, `1000000`: MaxBudgetUSD, `0.10`: 100_000,
	} {
		l, errs := DecodeClientKeyLimits([]byte(`{"budgetUsdDaily":`+in+`,"budgetUsdMonthly":`+in+`}`), "limits")
		if len(errs) > 0 || l.BudgetUSDDaily == nil || *l.BudgetUSDDaily != want || *l.BudgetUSDMonthly != want {
			t.Errorf("%s: %+v, %v; want %d micros", in, l, errs, want)
			continue
		}
		e := l.Effective()
		if e.BudgetUSDDaily != want || e.BudgetUSDMonthly != want {
			t.Errorf("%s: effective %+v", in, e)
		}
		out, _ := json.Marshal(l)
		back, errs := DecodeClientKeyLimits(out, "limits")
		if len(errs) > 0 || *back.BudgetUSDDaily != want {
			t.Errorf("%s: round trip %s: %+v, %v", in, out, back, errs)
		}
	}
	if e := (ClientKeyLimits{}).Effective(); e.BudgetUSDDaily != 0 || e.BudgetUSDMonthly != 0 {
		t.Errorf("absent budgets: %+v", e)
	}
	if !(ClientKeyLimits{}).IsZero() || (ClientKeyLimits{BudgetUSDMonthly: new(Micros)}).IsZero() {
		t.Error("IsZero ignores the budgets")
	}
	c := ClientKeyLimits{BudgetUSDDaily: new(Micros(5))}.Clone()
	if c.BudgetUSDDaily == nil || *c.BudgetUSDDaily != 5 {
		t.Errorf("clone %+v", c)
	}
}

// TestBudgetUSDRejects: more than 2 decimals, negatives, past the bound,
// strings: one error at the field, with the budget's own message.
func TestBudgetUSDRejects(t *testing.T) {
	msg := "must be a number of US dollars from 0 to 1000000 with at most 2 decimals"
	for _, in := range []string{`0.001`, `-1`, `1000000.01`, `1e7`, `"5"`, `true`, `0.0000001`} {
		for _, key := range []string{KeyBudgetUSDDaily, KeyBudgetUSDMonthly} {
			l, errs := DecodeClientKeyLimits([]byte(`{"`+key+`":`+in+`}`), "limits")
			if len(errs) != 1 || errs[0].Field != "limits."+key || errs[0].Message != msg ||
				errs[0].Code != CodeBudgetUSD || !l.IsZero() {
				t.Errorf("%s=%s: %+v, %v", key, in, l, errs)
			}
		}
	}
	// Read fail-open: a bad stored budget is none, with a warning.
	l, warnings := NormalizeClientKeyLimits([]byte(`{"budgetUsdDaily":0.005,"budgetUsdMonthly":3}`))
	if l.BudgetUSDDaily != nil || l.BudgetUSDMonthly == nil || *l.BudgetUSDMonthly != 3*MicrosPerUSD || len(warnings) != 1 {
		t.Errorf("normalised %+v, warnings %q", l, warnings)
	}
}

// TestBudgetUSDForm: the dashboard's fields set, keep and clear a budget.
func TestBudgetUSDForm(t *testing.T) {
	base := ClientKeyLimits{Weight: new(2)}
	l, errs := ApplyClientKeyForm(base, url.Values{"budgetUsdDaily": {" 0.01 "}, "budgetUsdMonthly": {"250"}}, "limits")
	if len(errs) > 0 || *l.BudgetUSDDaily != 10_000 || *l.BudgetUSDMonthly != 250*MicrosPerUSD || *l.Weight != 2 {
		t.Fatalf("form: %+v, %v", l, errs)
	}
	kept, errs := ApplyClientKeyForm(l, url.Values{"budgetUsdDaily": {""}}, "limits")
	if len(errs) > 0 || kept.BudgetUSDDaily != nil || *kept.BudgetUSDMonthly != 250*MicrosPerUSD {
		t.Fatalf("blank daily: %+v, %v", kept, errs)
	}
	_, errs = ApplyClientKeyForm(l, url.Values{"budgetUsdDaily": {"ten"}, "budgetUsdMonthly": {"0.125"}}, "limits")
	if len(errs) != 2 || errs[0].Field != "limits.budgetUsdDaily" || errs[1].Field != "limits.budgetUsdMonthly" {
		t.Fatalf("bad form: %v", errs)
	}
}
