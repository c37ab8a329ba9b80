package usage

import (
	"errors"
	"strings"
	"testing"
)

// TestScanMaxOutputDigits: an output bound of up to 18 digits is read, whatever
// its digits (9 included); 19 digits is no bound.
func TestScanMaxOutputDigits(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"model":"m","max_tokens":9}`:                   9,
		`{"model":"m","max_tokens":1999}`:                1999,
		`{"model":"m","max_tokens":123456789012345678}`:  123456789012345678,
		`{"model":"m","max_tokens":1234567890123456789}`: 0,
	} {
		info, err := Scan([]byte(body))
		if err != nil || info.MaxOutput != want {
			t.Errorf("Scan(%s): MaxOutput %d, err %v; want %d", body, info.MaxOutput, err, want)
		}
	}
}

// TestScanNestingBound: a member's value may nest 513 arrays or objects deep (the
// top level and maxNesting more), not one more.
func TestScanNestingBound(t *testing.T) {
	t.Parallel()
	arrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	objects := func(n int) string { return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) }
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"arrays at the bound", arrays(maxNesting + 1), true},
		{"arrays past the bound", arrays(maxNesting + 2), false},
		{"objects at the bound", objects(maxNesting + 1), true},
		{"objects past the bound", objects(maxNesting + 2), false},
	} {
		_, err := Scan([]byte(`{"model":"m","x":` + tc.value + `}`))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrSyntax)) {
			t.Errorf("%s: err %v, want ok %v (else ErrSyntax)", tc.name, err, tc.ok)
		}
	}
}

// TestScanTruncatedBodies: a body cut anywhere is a syntax error (or has no
// model), never a crash.
func TestScanTruncatedBodies(t *testing.T) {
	t.Parallel()
	full := `{"model":"glm-5","stream":true,"max_tokens":12,"messages":[{"role":"user","content":"hi"}]}`
	for i := range len(full) {
		if _, err := Scan([]byte(full[:i])); err == nil {
			t.Errorf("Scan(%q) = no error, want one", full[:i])
		}
	}
}

// TestAppendJSONStringInvalidUTF8: a byte that starts no valid UTF-8 sequence
// (0x80 and above, alone) becomes U+FFFD, never a raw byte in the JSON.
func TestAppendJSONStringInvalidUTF8(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"\x80":     `"\ufffd"`,
		"a\xffb":   `"a\ufffdb"`,
		"\x7f":     "\"\x7f\"",
		"é\"\n":    `"é\"\u000a"`,
		"glm-4.7":  `"glm-4.7"`,
		"\xe2\x82": `"\ufffd\ufffd"`,
	} {
		if got := string(AppendJSONString(nil, in)); got != want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestScanNumberGluedToLetterSameForEveryLetter: a number followed by a
// letter gets one verdict whatever the letter, the first and last of each
// case's range as the middle ones: the scanner's idea of where a word ends
// (which decides what it accepts) has no hole at a range's edge.
func TestScanNumberGluedToLetterSameForEveryLetter(t *testing.T) {
	t.Parallel()
	verdict := func(c byte) error {
		_, err := Scan([]byte(`{"model":"m","x":1` + string(c) + `}`))
		return err
	}
	want := verdict('m')
	for _, r := range []struct{ lo, hi byte }{{'a', 'z'}, {'A', 'Z'}} {
		for c := r.lo; c <= r.hi; c++ {
			if got := verdict(c); got != want {
				t.Errorf("number glued to %q: %v, want %v (as for 'm')", c, got, want)
			}
		}
	}
}

// TestScanChoices: the number of answers asked for (which multiplies a
// budget reservation's output) is a positive n or candidateCount; zero,
// negative or non-integer counts are no count and do not clear one already
// read.
func TestScanChoices(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"model":"m"}`:         0,
		`{"model":"m","n":3}`:   3,
		`{"model":"m","n":0}`:   0,
		`{"model":"m","n":-2}`:  0,
		`{"model":"m","n":"3"}`: 0,
		`{"model":"m","generationConfig":{"candidateCount":2}}`:        2,
		`{"model":"m","n":3,"generationConfig":{"candidateCount":0}}`:  3,
		`{"model":"m","n":3,"generationConfig":{"candidateCount":-1}}`: 3,
	} {
		info, err := Scan([]byte(body))
		if err != nil || info.Choices != want {
			t.Errorf("Scan(%s): Choices %d, err %v; want %d", body, info.Choices, err, want)
		}
	}
}
