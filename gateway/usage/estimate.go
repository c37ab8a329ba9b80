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

// mediaKeys are the keys of a Gemini image or file part.
var mediaKeys = [...]string{"inlineData", "inline_data", "fileData", "file_data"}

// MediaParts counts the image and file parts in a request body b, of any
// API: objects whose "type" is one of mediaTypes, and Gemini's
// inlineData / fileData members. It looks only at JSON string tokens (a
// quote inside a string is escaped), so text that merely mentions them does
// not count.
func MediaParts(b []byte) int64 {
	var n int64
	for i := 0; ; {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return n
		}
		i += k
		end, ok := stringEnd(b, i)
		if !ok {
			return n
		}
		key := b[i+1 : end-1]
		j := skipWS(b, end)
		if j >= len(b) || b[j] != ':' {
			i = end // a value, not a key
			continue
		}
		switch {
		case string(key) == "type":
			v := skipWS(b, j+1)
			if v < len(b) && b[v] == '"' {
				if ve, ok := stringEnd(b, v); ok {
					if isMediaType(b[v+1 : ve-1]) {
						n++
					}
					i = ve
					continue
				}
			}
		case isMediaKey(key):
			n++
		}
		i = j + 1
	}
}

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
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
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

func isMediaKey(k []byte) bool {
	for _, t := range mediaKeys {
		if string(k) == t {
			return true
		}
	}
	return false
}
