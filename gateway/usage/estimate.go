package usage

import (
	"bytes"
	"encoding/json"
)

// What a budget reservation's estimate needs beyond Scan: Gemini's
// candidate count (its body is not Scanned for a model) and the media
// parts of any API's input, each of which the estimate counts at a fixed
// number of tokens.

// GeminiCandidates is the candidateCount of a Gemini request body
// (generationConfig.candidateCount, or generation_config.candidate_count),
// when it is a positive integer; 0 otherwise (one answer).
func GeminiCandidates(b []byte) int64 {
	type config struct {
		Camel json.RawMessage `json:"candidateCount"`
		Snake json.RawMessage `json:"candidate_count"`
	}
	var body struct {
		Camel *config `json:"generationConfig"`
		Snake *config `json:"generation_config"`
	}
	if !bytes.Contains(b, []byte("andidate")) || json.Unmarshal(b, &body) != nil {
		return 0
	}
	var n int64
	for _, c := range []*config{body.Camel, body.Snake} {
		if c == nil {
			continue
		}
		for _, v := range []json.RawMessage{c.Camel, c.Snake} {
			if m, ok := positiveInt(v); ok {
				n = max(n, m)
			}
		}
	}
	return n
}

// mediaTypes are the "type" values of an image or file part: OpenAI chat
// (image_url, file, input_audio), Responses (input_image, input_file) and
// Anthropic (image, document).
var mediaTypes = [...]string{"image_url", "image", "input_image", "file", "input_file", "document", "input_audio"}

// typeKey and mediaKeys are the quoted keys MediaParts looks for: "type",
// and the keys of a Gemini image or file part.
var (
	typeKey   = []byte(`"type"`)
	mediaKeys = [...][]byte{[]byte(`"inlineData"`), []byte(`"inline_data"`), []byte(`"fileData"`), []byte(`"file_data"`)}
)

// MediaParts counts the image and file parts in a request body b, of any
// API: objects whose "type" is one of mediaTypes, and Gemini's
// inlineData / fileData members. Only keys count — a quoted name right
// after '{' or ',' and before ':' — and a quote inside a JSON string is
// escaped, so text that merely mentions them does not. Found with
// bytes.Index, not a walk of every string: a long prompt costs little.
func MediaParts(b []byte) int64 {
	var n int64
	forKey(b, typeKey, func(v int) {
		if v < len(b) && b[v] == '"' {
			if ve, ok := stringEnd(b, v); ok && isMediaType(b[v+1:ve-1]) {
				n++
			}
		}
	})
	for _, k := range mediaKeys {
		forKey(b, k, func(int) { n++ })
	}
	return n
}

// forKey calls f with the offset of the value of each member of b whose
// key is the quoted name q.
func forKey(b, q []byte, f func(value int)) {
	for i := 0; ; {
		k := bytes.Index(b[i:], q)
		if k < 0 {
			return
		}
		at := i + k
		i = at + len(q)
		p := at - 1
		for p >= 0 && isSpace(b[p]) {
			p--
		}
		if p < 0 || (b[p] != '{' && b[p] != ',') {
			continue
		}
		if j := skipWS(b, i); j < len(b) && b[j] == ':' {
			f(skipWS(b, j+1))
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnd is the offset just past the JSON string starting at b[i] ('"').
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isMediaType(v []byte) bool {
	for _, t := range mediaTypes {
		if string(v) == t {
			return true
		}
	}
	return false
}
