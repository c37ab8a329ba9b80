package limits

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// ShadowCaps are caps that are observed, never enforced: the gateway counts
// in-flight requests against them as if they were real and records how
// many requests would have queued, so an operator can try a cap before
// setting it. They have the same keys and ranges as the real caps
// (rateLimitOverrides.shadow.maxConcurrent, .shadow.modelConcurrency.<M>).
type ShadowCaps struct {
	// MaxConcurrent is the shadow cap of the connection gate; 0 = none.
	MaxConcurrent *int `json:"maxConcurrent,omitempty" validate:"omitnil,between=0:10000"`
	// ModelConcurrency is the shadow cap of each upstream model's gate.
	ModelConcurrency map[string]int `json:"modelConcurrency,omitempty" validate:"omitempty,max=500,dive,keys,modelkey,endkeys,cap=1:10000"`
}

// Clone returns a deep copy of s.
func (s ShadowCaps) Clone() ShadowCaps {
	c := ShadowCaps{MaxConcurrent: clonePtr(s.MaxConcurrent)}
	if len(s.ModelConcurrency) > 0 {
		c.ModelConcurrency = maps.Clone(s.ModelConcurrency)
	}
	return c
}

// IsZero reports whether s sets no shadow cap at all.
func (s ShadowCaps) IsZero() bool {
	return s.MaxConcurrent == nil && len(s.ModelConcurrency) == 0
}

// The form names of the shadow caps on the dashboard: the JSON path below
// rateLimitOverrides, dotted.
const (
	FormShadowMaxConcurrent    = KeyShadow + "." + KeyMaxConcurrent
	FormShadowModelConcurrency = KeyShadow + "." + KeyModelConcurrency
)

// IsAdaptive reports whether o asks for adaptive caps.
func (o Overrides) IsAdaptive() bool { return o.Adaptive != nil && *o.Adaptive }

// overrideProblems adds the rules that span fields to the problems one
// decoded document has: adaptive caps learn below a configured connection
// cap, so "adaptive": true needs a valid maxConcurrent of 1 or more. The
// problem is a validation one, so a fail-open read drops adaptive (and
// keeps the caps as they are).
func overrideProblems(problems []problem, o *Overrides) []problem {
	if !o.IsAdaptive() {
		return problems
	}
	capOK := o.MaxConcurrent != nil && *o.MaxConcurrent >= 1 && !slices.ContainsFunc(problems, func(p problem) bool {
		return len(p.path) > 0 && p.path[0] == KeyMaxConcurrent
	})
	if capOK {
		return problems
	}
	return append(problems, problem{
		path:       []string{KeyAdaptive},
		msg:        newMessage(CodeAdaptiveNeedsCap, "needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it)"),
		validation: true,
	})
}

// applyExtraForm applies the form fields of adaptive and shadow to members
// (the top-level members of the overrides document) and returns the
// textarea problems it found. adaptive is a checkbox drawn after a hidden
// "false", so the field is present exactly when the form shows it: any
// "true" (or a bare checkbox's "on") sets it, anything else removes the
// key (false is the default). shadow.maxConcurrent and
// shadow.modelConcurrency follow the rules of their real counterparts; a
// shadow object left empty is removed.
func applyExtraForm(members map[string]json.RawMessage, form url.Values, pathPrefix string) FieldErrors {
	if vs, ok := form[KeyAdaptive]; ok {
		delete(members, KeyAdaptive)
		if slices.ContainsFunc(vs, func(v string) bool { return v == "true" || v == "on" }) {
			members[KeyAdaptive] = json.RawMessage("true")
		}
	}
	// affinity is on by default: its checkbox (after a hidden "false")
	// unticked stores false, ticked removes the key.
	if vs, ok := form[KeyAffinity]; ok {
		delete(members, KeyAffinity)
		if !slices.ContainsFunc(vs, func(v string) bool { return v == "true" || v == "on" }) {
			members[KeyAffinity] = json.RawMessage("false")
		}
	}
	_, hasMax := form[FormShadowMaxConcurrent]
	_, hasModels := form[FormShadowModelConcurrency]
	if !hasMax && !hasModels {
		return nil
	}
	shadow := map[string]json.RawMessage{}
	if raw, ok := members[KeyShadow]; ok {
		if mems, ok := objectMembers(raw); ok {
			for _, m := range mems {
				shadow[m.key] = m.val
			}
		}
	}
	var errs FieldErrors
	if hasMax {
		if text := strings.TrimSpace(form.Get(FormShadowMaxConcurrent)); text == "" {
			delete(shadow, KeyMaxConcurrent)
		} else {
			shadow[KeyMaxConcurrent] = formNumber(text)
		}
	}
	if hasModels {
		caps, lineErrs := ParseModelCaps(form.Get(FormShadowModelConcurrency))
		for _, le := range lineErrs {
			errs = append(errs, FieldError{
				Field: joinPath(pathPrefix, []string{KeyShadow, KeyModelConcurrency}), Message: le.Error(), Code: CodeLine, Args: []any{le},
			})
		}
		delete(shadow, KeyModelConcurrency)
		if caps != nil {
			raw, err := json.Marshal(caps)
			if err == nil {
				shadow[KeyModelConcurrency] = raw
			}
		}
	}
	delete(members, KeyShadow)
	if len(shadow) > 0 {
		if raw, err := json.Marshal(shadow); err == nil {
			members[KeyShadow] = raw
		}
	}
	return errs
}
