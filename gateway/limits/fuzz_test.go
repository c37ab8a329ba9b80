package limits

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseModelCaps checks that FormatModelCaps(ParseModelCaps(x)) is a
// fixed point and that every accepted map survives Format then Parse.
func FuzzParseModelCaps(f *testing.F) {
	for _, seed := range []string{
		"", "glm-5=1\nglm-4.7=3", "a=1,b=2,", " a = 10000 \r\n\n", "a=0", "a=1\na=2", "=1", "a b=1", "a=1.0", "a=1e3",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		caps, errs := ParseModelCaps(text)
		if errs != nil {
			if caps != nil {
				t.Fatalf("ParseModelCaps(%q) returned a map with errors", text)
			}
			return
		}
		formatted := FormatModelCaps(caps)
		again, errs := ParseModelCaps(formatted)
		if errs != nil {
			t.Fatalf("ParseModelCaps(FormatModelCaps(%v)) = errors %v", caps, errs)
		}
		if diff := cmp.Diff(caps, again); diff != "" {
			t.Fatalf("Parse(Format(m)) != m for text %q (-m +again):\n%s", text, diff)
		}
		if got := FormatModelCaps(again); got != formatted {
			t.Fatalf("Format(Parse(x)) not stable: %q then %q", formatted, got)
		}
		// An accepted map is also accepted as JSON.
		data, err := json.Marshal(Overrides{ModelConcurrency: caps})
		if err != nil {
			t.Fatal(err)
		}
		if _, errs := DecodeOverrides(data, ""); errs != nil {
			t.Fatalf("text %q parsed but its JSON %s is rejected: %v", text, data, errs)
		}
	})
}

// FuzzDecodeOverrides checks that the strict decoder never panics, that
// what it accepts marshals and decodes back identically, and that Normalize
// reads the same document the same way, without warnings. Normalize must
// never panic either, and whatever it returns must pass the strict decoder.
func FuzzDecodeOverrides(f *testing.F) {
	for _, seed := range []string{
		`{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3}}`,
		`{"executionMaxWaitMs":300000,"maxWaitMs":30000}`,
		`{"rpd":-10}`, `{"rpd":12.5}`, `{"rpd":"500"}`, `{"tpd":1e10,"rpm":1.0}`,
		`{"modelConcurrency":{"":0,"a":10001,"b":"2"},"tmp":1}`,
		`{"modelConcurrency":[]}`, `null`, `{}`, `[]`, `{"rpm":1,"rpm":2}`, `{"modelConcurrency":{"a":null}}`,
		`{"maxConcurrent":8,"adaptive":true}`, `{"adaptive":true,"maxConcurrent":20000}`, `{"adaptive":"x"}`,
		`{"shadow":{"maxConcurrent":2,"modelConcurrency":{"glm-5":1}}}`, `{"shadow":{"modelConcurrency":{"a":0}}}`, `{"shadow":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		normalized, _ := Normalize(data)
		nData, err := json.Marshal(normalized)
		if err != nil {
			t.Fatalf("Marshal(Normalize(%q)): %v", data, err)
		}
		if _, errs := DecodeOverrides(nData, ""); errs != nil {
			t.Fatalf("Normalize(%q) = %s, which the strict decoder rejects: %v", data, nData, errs)
		}

		o, errs := DecodeOverrides(data, "p")
		if errs != nil {
			if len(errs) == 0 {
				t.Fatalf("DecodeOverrides(%q) returned empty non-nil errors", data)
			}
			return
		}
		out, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, errs := DecodeOverrides(out, "p")
		if errs != nil {
			t.Fatalf("DecodeOverrides(%s) (marshalled from %q) = errors %v", out, data, errs)
		}
		if diff := cmp.Diff(o, again); diff != "" {
			t.Fatalf("decode(marshal(decode(%q))) changed (-first +again):\n%s", data, diff)
		}
		n, warnings := Normalize(data)
		if warnings != nil {
			t.Fatalf("Normalize(%q) warned on a document the strict decoder accepts: %v", data, warnings)
		}
		if diff := cmp.Diff(o, n); diff != "" {
			t.Fatalf("Normalize(%q) differs from DecodeOverrides (-decode +normalize):\n%s", data, diff)
		}
	})
}

// FuzzDecodeSettings checks the settings decoders the same way as
// FuzzDecodeOverrides.
func FuzzDecodeSettings(f *testing.F) {
	for _, seed := range []string{
		`{"maxAttempts":2,"providers":{"zai":{"maxConcurrent":8,"maxWaitMs":1.0e4}}}`,
		`{"maxAttempts":11,"providers":{"Bad":{"maxConcurrent":-1},"zai":{"rpm":1}},"tmp":1}`,
		`{"providers":{"zai":{}}}`, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		normalized, _ := NormalizeSettings(data)
		nData, err := json.Marshal(normalized)
		if err != nil {
			t.Fatalf("Marshal(NormalizeSettings(%q)): %v", data, err)
		}
		if _, errs := DecodeSettings(nData, ""); errs != nil {
			t.Fatalf("NormalizeSettings(%q) = %s, which the strict decoder rejects: %v", data, nData, errs)
		}
		s, errs := DecodeSettings(data, "")
		if errs != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, errs := DecodeSettings(out, "")
		if errs != nil {
			t.Fatalf("DecodeSettings(%s) (marshalled from %q) = errors %v", out, data, errs)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Fatalf("decode(marshal(decode(%q))) changed (-first +again):\n%s", data, diff)
		}
		if n, warnings := NormalizeSettings(data); warnings != nil || !cmp.Equal(s, n) {
			t.Fatalf("NormalizeSettings(%q) = %+v, %v; want %+v without warnings", data, n, warnings, s)
		}
	})
}

// FuzzMergePatch checks that MergePatch never panics, returns valid JSON,
// and is idempotent: applying a patch a second time changes nothing.
func FuzzMergePatch(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1,"c":[1]}}`), []byte(`{"a":{"b":null,"d":{"e":null}}}`))
	f.Add([]byte(`[1]`), []byte(`{"x":null}`))
	f.Add([]byte(``), []byte(`"s"`))
	f.Fuzz(func(t *testing.T, target, patch []byte) {
		once, err := MergePatch(target, patch)
		if err != nil {
			return
		}
		if !json.Valid(once) {
			t.Fatalf("MergePatch(%q, %q) = %q, not valid JSON", target, patch, once)
		}
		twice, err := MergePatch(once, patch)
		if err != nil {
			t.Fatalf("MergePatch of its own result: %v", err)
		}
		if string(once) != string(twice) {
			t.Fatalf("not idempotent: %s then %s", once, twice)
		}
	})
}
