package limits

import (
	"encoding/json"
	"net/url"
)

// ApplyForm applies the dashboard's override fields to base and returns the
// result, strictly checked. Form fields carry the JSON names (see
// OverrideKeys); modelConcurrency is the model=cap textarea. A field absent
// from the form leaves its key as it is in base, so keys set through the API
// survive a form that does not show them; a field present but blank removes
// its key. Numbers follow the JSON rules ("1e3" is whole, "1.5" is not).
// The adaptive checkbox and the shadow caps (shadow.maxConcurrent,
// shadow.modelConcurrency) follow the same rules; see applyExtraForm.
// Every problem is reported with its path under pathPrefix; a textarea
// problem is reported on the modelConcurrency path with its line, like
// `line 2: "glm-5=0": cap must be a whole number from 1 to 10000`, with
// Code CodeLine and the LineError as its one argument. On any
// problem the returned Overrides is the zero value.
func ApplyForm(base Overrides, form url.Values, pathPrefix string) (Overrides, FieldErrors) {
	doc, err := json.Marshal(base)
	if err != nil {
		// Overrides holds only pointers to ints and a map[string]int.
		return Overrides{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
	}
	members := map[string]json.RawMessage{}
	if err := json.Unmarshal(doc, &members); err != nil {
		return Overrides{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
	}
	errs := applyExtraForm(members, form, pathPrefix)
	for _, key := range OverrideKeys() {
		text, present := formText(form, key)
		if !present || key == KeyAdaptive || key == KeyShadow || key == KeyAffinity {
			continue
		}
		if text == "" {
			delete(members, key)
			continue
		}
		if key == KeyModelConcurrency {
			caps, lineErrs := ParseModelCaps(text)
			for _, le := range lineErrs {
				errs = append(errs, FieldError{
					Field: joinPath(pathPrefix, []string{key}), Message: le.Error(), Code: CodeLine, Args: []any{le},
				})
			}
			if caps == nil {
				delete(members, key)
				continue
			}
			raw, err := json.Marshal(caps)
			if err != nil {
				return Overrides{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
			}
			members[key] = raw
			continue
		}
		members[key] = formNumber(text)
	}
	merged, err := json.Marshal(members)
	if err != nil {
		return Overrides{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
	}
	o, decodeErrs := DecodeOverrides(merged, pathPrefix)
	errs = append(errs, decodeErrs...)
	if len(errs) > 0 {
		return Overrides{}, SortFieldErrors(errs)
	}
	return o, nil
}
