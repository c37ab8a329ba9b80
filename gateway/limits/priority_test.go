package limits

import (
	"net/url"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestPriorityNamesMatchAdmission: the classes a key may name are
// admission's, in its order (highest first), and the oneof rule on
// ClientKeyLimits.Priority accepts exactly those.
func TestPriorityNamesMatchAdmission(t *testing.T) {
	var want []string
	for _, p := range admission.Priorities {
		want = append(want, p.String())
	}
	if !slices.Equal(PriorityNames, want) {
		t.Fatalf("PriorityNames %v, admission's %v", PriorityNames, want)
	}
	for _, name := range PriorityNames {
		l, errs := DecodeClientKeyLimits([]byte(`{"priority":"`+name+`"}`), "limits")
		if len(errs) > 0 || l.Priority == nil || *l.Priority != name || l.Effective().Priority != name {
			t.Errorf("priority %q: %+v, %v", name, l, errs)
		}
	}
	if got := (ClientKeyLimits{}).Effective().Priority; got != DefaultPriority || got != admission.PriorityStandard.String() {
		t.Errorf("default priority %q", got)
	}
}

func TestPriorityRejected(t *testing.T) {
	oneOf := "must be one of: interactive, standard, batch"
	for _, in := range []string{`{"priority":"high"}`, `{"priority":"Batch"}`, `{"priority":""}`, `{"priority":1}`, `{"priority":["batch"]}`} {
		l, errs := DecodeClientKeyLimits([]byte(in), "limits")
		if len(errs) != 1 || errs[0].Field != "limits.priority" || !l.IsZero() {
			t.Errorf("%s: %+v, %v; want one error at limits.priority", in, l, errs)
			continue
		}
		if in != `{"priority":1}` && in != `{"priority":["batch"]}` && errs[0].Message != oneOf {
			t.Errorf("%s: message %q, want %q", in, errs[0].Message, oneOf)
		}
	}
	// Read fail-open: a bad stored class is no class (standard), with a warning.
	l, warnings := NormalizeClientKeyLimits([]byte(`{"priority":"urgent","weight":2}`))
	if l.Priority != nil || *l.Weight != 2 || len(warnings) != 1 {
		t.Errorf("normalised %+v, warnings %q", l, warnings)
	}
}

func TestPriorityForm(t *testing.T) {
	base := ClientKeyLimits{Weight: new(2)}
	l, errs := ApplyClientKeyForm(base, url.Values{"priority": {" batch "}}, "limits")
	if len(errs) > 0 || l.Priority == nil || *l.Priority != "batch" || *l.Weight != 2 {
		t.Fatalf("form batch: %+v, %v", l, errs)
	}
	l, errs = ApplyClientKeyForm(l, url.Values{"priority": {""}}, "limits")
	if len(errs) > 0 || l.Priority != nil {
		t.Fatalf("blank form field keeps %+v, %v", l, errs)
	}
	if _, errs = ApplyClientKeyForm(base, url.Values{"priority": {"urgent"}}, "limits"); len(errs) != 1 || errs[0].Field != "limits.priority" {
		t.Fatalf("bad class: %v", errs)
	}
}
