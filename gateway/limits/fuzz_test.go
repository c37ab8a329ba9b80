package limits

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// textCodec is one of the package's textarea codecs, for fuzzTextCodec.
type textCodec[V any] struct {
	parse  func(string) (map[string]V, []LineError)
	format func(map[string]V) string
	// decode marshals an accepted map into its JSON document and checks it
	// strictly, as the API would.
	decode func(map[string]V) ([]byte, FieldErrors)
}

// fuzzTextCodec checks a textarea codec on seeds and fuzzed text: no map
// comes with errors, Format(Parse(x)) is a fixed point, every accepted map
// survives Format then Parse, and what the textarea accepts the strict JSON
// decoder accepts too.
func fuzzTextCodec[V any](f *testing.F, c textCodec[V], seeds ...string) {
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		caps, errs := c.parse(text)
		if errs != nil {
			if caps != nil {
				t.Fatalf("Parse(%q) returned a map with errors", text)
			}
			return
		}
		formatted := c.format(caps)
		again, errs := c.parse(formatted)
		if errs != nil {
			t.Fatalf("Parse(Format(%v)) = errors %v", caps, errs)
		}
		if diff := cmp.Diff(caps, again); diff != "" {
			t.Fatalf("Parse(Format(m)) != m for text %q (-m +again):\n%s", text, diff)
		}
		if got := c.format(again); got != formatted {
			t.Fatalf("Format(Parse(x)) not stable: %q then %q", formatted, got)
		}
		if data, errs := c.decode(caps); errs != nil {
			t.Fatalf("text %q parsed but its JSON %s is rejected: %v", text, data, errs)
		}
	})
}

// marshalled marshals v (which cannot fail for the package's documents) and
// decodes it with decode.
func marshalled[T any](v any, decode func([]byte, string) (T, FieldErrors)) ([]byte, FieldErrors) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, FieldErrors{{Message: err.Error()}}
	}
	_, errs := decode(data, "")
	return data, errs
}

// FuzzParseModelCaps fuzzes the model=cap codec (see fuzzTextCodec).
func FuzzParseModelCaps(f *testing.F) {
	fuzzTextCodec(f, textCodec[int]{
		parse: ParseModelCaps, format: FormatModelCaps,
		decode: func(m map[string]int) ([]byte, FieldErrors) {
			return marshalled(Overrides{ModelConcurrency: m}, DecodeOverrides)
		},
	}, "", "glm-5=1\nglm-4.7=3", "a=1,b=2,", " a = 10000 \r\n\n", "a=0", "a=1\na=2", "=1", "a b=1", "a=1.0", "a=1e3")
}

// FuzzParseProviderCaps fuzzes the per-provider codec (see fuzzTextCodec):
// its ranges are the settings validator's.
func FuzzParseProviderCaps(f *testing.F) {
	fuzzTextCodec(f, textCodec[ProviderSettings]{
		parse: ParseProviderCaps, format: FormatProviderCaps,
		decode: func(m map[string]ProviderSettings) ([]byte, FieldErrors) {
			return marshalled(Settings{Providers: m}, DecodeSettings)
		},
	}, "", "zai 8 30000\nopenai 4", "  a\t1 \r\n\n# c\n", "a 100000 120000", "a 20000", "a 1e3 2.0",
		"a 1\na 2", "A 1", "a x", "a 1 2 3", "a", "a -1 +2")
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
