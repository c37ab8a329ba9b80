package limits

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/go-playground/validator/v10"
)

// This file holds the one decoder behind DecodeOverrides, DecodeSettings,
// Normalize and NormalizeSettings. It walks the JSON itself (instead of
// json.Unmarshal) so that it can tell absent from null from zero, accept
// 1.0 and 1e3 as whole numbers, refuse 1.5, and name the path of every
// problem, not only the first. Range rules live in the structs' validate
// tags and are checked by the shared validator afterwards.

// problem is one thing wrong with a document, at path below the document.
type problem struct {
	path []string
	msg  message
	// validation marks a value that decoded but broke a rule; the lenient
	// reader removes it after the fact (values that did not decode were
	// never stored).
	validation bool
	// duplicate marks a key given twice: the first value did decode, so a
	// rule it breaks is still reported (and dropped by the lenient reader).
	duplicate bool
}

type decoder struct {
	problems []problem
	// namespaces maps the validator namespace of every decoded field and
	// map entry to its path, so a map key holding "." or "[" is never
	// misread from the namespace string.
	namespaces map[string][]string
}

// reported reports whether a decoding problem is recorded at path.
func (d *decoder) reported(path []string) bool {
	for _, p := range d.problems {
		if !p.validation && !p.duplicate && slices.Equal(p.path, path) {
			return true
		}
	}
	return false
}

func (d *decoder) add(path []string, msg message) {
	d.problems = append(d.problems, problem{path: path, msg: msg})
}

// decodeDocument decodes data into out, a pointer to a struct, then
// validates it. A document that is "null" decodes to the zero value. out
// holds every value that decoded, including ones that broke a rule; the
// caller decides between rejecting (strict) and dropping (lenient).
func decodeDocument(data []byte, out any) []problem {
	rv := reflect.ValueOf(out).Elem()
	data = trimJSONSpace(data)
	switch {
	case len(data) == 0:
		return []problem{{msg: plainMessage(CodeNotObject)}}
	case !json.Valid(data):
		return []problem{{msg: plainMessage(CodeNotJSON)}}
	case string(data) == "null":
		return nil
	}
	d := &decoder{namespaces: map[string][]string{}}
	d.decodeStruct(data, rv, nil, rv.Type().Name())
	prune(rv)
	err := Validator().Struct(out)
	var ve validator.ValidationErrors
	if errors.As(err, &ve) {
		for _, fe := range ve {
			path, ok := d.namespaces[fe.Namespace()]
			if !ok {
				path = namespacePath(fe.Namespace())
			}
			if d.reported(path) {
				continue // a value that did not decode, held as a placeholder
			}
			d.problems = append(d.problems, problem{path: path, msg: translate(fe), validation: true})
		}
	} else if err != nil {
		// Only a programming error (a bad tag) gets here.
		d.add(nil, plainMessage(CodeInvalid))
	}
	return d.problems
}

// strictErrors turns problems into sorted FieldErrors under prefix.
func strictErrors(problems []problem, prefix string) FieldErrors {
	if len(problems) == 0 {
		return nil
	}
	out := make(FieldErrors, 0, len(problems))
	for _, p := range problems {
		out = append(out, p.msg.fieldError(joinPath(prefix, p.path)))
	}
	return SortFieldErrors(out)
}

// lenientErrors removes every value that broke a rule from out (a pointer to
// a struct) and returns the problems as FieldErrors under prefix, sorted.
func lenientErrors(problems []problem, out any, prefix string) FieldErrors {
	if len(problems) == 0 {
		return nil
	}
	rv := reflect.ValueOf(out).Elem()
	errs := make(FieldErrors, 0, len(problems))
	for _, p := range problems {
		if p.validation {
			unset(rv, p.path)
		}
		errs = append(errs, p.msg.fieldError(joinPath(prefix, p.path)))
	}
	prune(rv)
	pruneSlices(rv)
	return SortFieldErrors(errs)
}

// warningLines writes lenient problems as sorted warning lines:
// "path: message (ignored)".
func warningLines(errs FieldErrors) []string {
	if len(errs) == 0 {
		return nil
	}
	warnings := make([]string, 0, len(errs))
	for _, e := range errs {
		warnings = append(warnings, e.Field+": "+e.Message+" (ignored)")
	}
	slices.Sort(warnings)
	return slices.Compact(warnings)
}

type member struct {
	key string
	val json.RawMessage
}

// objectMembers splits a valid JSON value into its members, in order, or
// reports false when it is not an object.
func objectMembers(raw []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var mems []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		mems = append(mems, member{key: key, val: val})
	}
	return mems, true
}

func isNull(raw []byte) bool { return string(trimJSONSpace(raw)) == "null" }

// trimJSONSpace trims the four white-space characters JSON allows.
func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// fieldIndex maps JSON names to field indexes of a struct type.
func fieldIndex(t reflect.Type) map[string]int {
	idx := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name := fieldName(t.Field(i)); name != "" && t.Field(i).IsExported() {
			idx[name] = i
		}
	}
	return idx
}

func extend(path []string, seg string) []string {
	return append(slices.Clip(path), seg)
}

func (d *decoder) decodeStruct(raw []byte, rv reflect.Value, path []string, ns string) {
	mems, ok := objectMembers(raw)
	if !ok {
		d.add(path, plainMessage(CodeNotObject))
		return
	}
	fields := fieldIndex(rv.Type())
	seen := make(map[string]bool, len(mems))
	for _, m := range mems {
		fpath := extend(path, m.key)
		if seen[m.key] {
			d.problems = append(d.problems, problem{path: fpath, msg: plainMessage(CodeDuplicateField), duplicate: true})
			continue
		}
		seen[m.key] = true
		i, ok := fields[m.key]
		if !ok {
			d.add(fpath, plainMessage(CodeUnknownField))
			continue
		}
		fns := ns + "." + m.key
		d.namespaces[fns] = fpath
		if isNull(m.val) {
			continue // null means absent
		}
		d.decodeField(m.val, rv.Field(i), rv.Type().Field(i).Tag.Get("validate"), fpath, fns)
	}
}

func (d *decoder) decodeField(raw []byte, fv reflect.Value, rules string, path []string, ns string) {
	if fv.Type() == reflect.TypeFor[AlertWebhooks]() {
		d.decodeAlerts(raw, fv, path)
		return
	}
	switch fv.Kind() {
	case reflect.Pointer:
		elem := fv.Type().Elem()
		switch elem.Kind() {
		case reflect.Bool:
			var b bool
			if err := json.Unmarshal(raw, &b); err != nil {
				d.add(path, plainMessage(CodeNotBool))
				return
			}
			fv.Set(reflect.ValueOf(&b))
			return
		case reflect.Struct:
			p := reflect.New(elem)
			d.decodeStruct(raw, p.Elem(), path, ns)
			fv.Set(p)
			return
		case reflect.String:
			// A name (a client key's priority): anything but a JSON string
			// gets the rule's own message, as a bad string does.
			var str string
			if err := json.Unmarshal(raw, &str); err != nil {
				d.add(path, stringMessage(rules))
				return
			}
			fv.Set(reflect.ValueOf(&str))
			return
		}
		if elem == reflect.TypeFor[Micros]() {
			m, ok := ParseUSD(string(trimJSONSpace(raw)))
			if !ok {
				d.add(path, microsMessage(rules))
				return
			}
			fv.Set(reflect.ValueOf(&m))
			return
		}
		if !isIntKind(elem.Kind()) {
			panic("limits: unsupported field type " + fv.Type().String())
		}
		n, ok := wholeNumber(raw)
		if !ok {
			d.add(path, leafMessage(rules, false))
			return
		}
		p := reflect.New(elem)
		setIntSaturated(p.Elem(), n)
		fv.Set(p)
	case reflect.Map:
		d.decodeMap(raw, fv, rules, path, ns)
	case reflect.Slice:
		d.decodeStrings(raw, fv, rules, path, ns)
	default:
		panic("limits: unsupported field type " + fv.Type().String())
	}
}

// decodeStrings decodes a JSON array of strings (a client key's models). An
// element that is not a string is reported at its index and held as "" so
// that every element keeps its index (the lenient reader then drops it).
func (d *decoder) decodeStrings(raw []byte, fv reflect.Value, rules string, path []string, ns string) {
	if fv.Type().Elem().Kind() != reflect.String {
		panic("limits: unsupported slice type " + fv.Type().String())
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		d.add(path, plainMessage(CodeNotModelList))
		return
	}
	out := reflect.MakeSlice(fv.Type(), len(elems), len(elems))
	seen := stringSet{}
	for i, e := range elems {
		epath := extend(path, strconv.Itoa(i))
		d.namespaces[ns+"["+strconv.Itoa(i)+"]"] = epath
		var str string
		if err := json.Unmarshal(e, &str); err != nil {
			d.add(epath, elemMessage(rules))
			continue
		}
		out.Index(i).SetString(str)
		// A repeat is reported at its own index, so the lenient reader drops
		// only the repeat (a slice-level rule would drop the whole list).
		if validModelPattern(str) && !seen.add(str) {
			d.problems = append(d.problems, problem{path: epath, msg: plainMessage(CodeUnique), validation: true})
		}
	}
	if out.Len() > 0 {
		fv.Set(out)
	}
}

type stringSet map[string]bool

// add adds s and reports whether it was new.
func (set stringSet) add(s string) bool {
	if set[s] {
		return false
	}
	set[s] = true
	return true
}

func (d *decoder) decodeMap(raw []byte, fv reflect.Value, rules string, path []string, ns string) {
	t := fv.Type()
	mems, ok := objectMembers(raw)
	if !ok {
		msg := plainMessage(CodeNotObject)
		switch t.Elem().Kind() {
		case reflect.Int:
			msg = plainMessage(CodeNotModelMap)
		case reflect.Struct:
			msg = plainMessage(CodeNotProviderMap)
		case reflect.String:
			msg = plainMessage(CodeNotAliasMap)
		}
		d.add(path, msg)
		return
	}
	m := reflect.MakeMapWithSize(t, len(mems))
	seen := make(map[string]bool, len(mems))
	for _, mem := range mems {
		epath := extend(path, mem.key)
		if seen[mem.key] {
			d.problems = append(d.problems, problem{path: epath, msg: plainMessage(CodeDuplicateField), duplicate: true})
			continue
		}
		seen[mem.key] = true
		ens := ns + "[" + mem.key + "]"
		d.namespaces[ens] = epath
		if isNull(mem.val) {
			continue
		}
		key := reflect.ValueOf(mem.key).Convert(t.Key())
		switch ek := t.Elem().Kind(); {
		case isIntKind(ek):
			n, ok := wholeNumber(mem.val)
			if !ok {
				d.add(epath, leafMessage(rules, true))
				continue
			}
			ev := reflect.New(t.Elem()).Elem()
			setIntSaturated(ev, n)
			m.SetMapIndex(key, ev)
		case ek == reflect.Struct:
			ev := reflect.New(t.Elem()).Elem()
			d.decodeStruct(mem.val, ev, epath, ens)
			m.SetMapIndex(key, ev)
		case ek == reflect.String:
			var str string
			if err := json.Unmarshal(mem.val, &str); err != nil {
				d.add(epath, mapElemMessage(rules))
				continue
			}
			m.SetMapIndex(key, reflect.ValueOf(str).Convert(t.Elem()))
		default:
			panic("limits: unsupported map type " + t.String())
		}
	}
	if m.Len() > 0 {
		fv.Set(m)
	}
}

// wholeNumber reads a JSON value that must be a whole number.
func wholeNumber(raw []byte) (int64, bool) {
	n, res := parseWhole(string(trimJSONSpace(raw)))
	return n, res == wholeOK
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// setIntSaturated stores n, clamped to what the field's type can hold, so an
// over-large number still fails its range rule instead of wrapping around.
func setIntSaturated(v reflect.Value, n int64) {
	if v.OverflowInt(n) {
		shift := 64 - v.Type().Bits()
		if n > 0 {
			n = math.MaxInt64 >> shift
		} else {
			n = math.MinInt64 >> shift
		}
	}
	v.SetInt(n)
}
