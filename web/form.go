package web

import "strings"

// input describes one labelled form control; the components in form.templ draw it.
type input struct {
	Name         string   // form name = JSON name; also the suffix of ids and test ids
	Label        string   // localised label
	Value        string   // what was typed or stored
	Type         string   // input type; "" means text
	Hint         string   // localised hint under or beside the control
	Unit         string   // unit after the control ("ms")
	Placeholder  string   // effective value when blank, e.g. "default 30000"
	InputMode    string   // "numeric" for whole numbers
	Errors       []string // localised messages for this field
	Disabled     bool
	Required     bool
	Rows         int    // > 0 draws a textarea
	Autocomplete string // autocomplete attribute; "" means off for secrets and numbers
	Wide         bool   // spans the full width of the form grid
}

func (f input) id() string     { return "f-" + f.Name }
func (f input) errID() string  { return "err-" + f.Name }
func (f input) hintID() string { return "hint-" + f.Name }
func (f input) invalid() bool  { return len(f.Errors) > 0 }
func (f input) inputType() string {
	if f.Type == "" {
		return "text"
	}
	return f.Type
}

// describedBy lists the ids of the error and the hint, error first.
func (f input) describedBy() string {
	var ids []string
	if f.invalid() {
		ids = append(ids, f.errID())
	}
	if f.Hint != "" {
		ids = append(ids, f.hintID())
	}
	return strings.Join(ids, " ")
}

func (f input) autocomplete() string {
	if f.Autocomplete == "" {
		return "off"
	}
	return f.Autocomplete
}

// numeric returns a whole-number input spec.
func numeric(name, label, value, unit, hint, placeholder string, errs FieldErrors, disabled bool) input {
	return input{
		Name: name, Label: label, Value: value, Unit: unit, Hint: hint,
		Placeholder: placeholder, InputMode: "numeric", Errors: errs.Get(name), Disabled: disabled,
	}
}
