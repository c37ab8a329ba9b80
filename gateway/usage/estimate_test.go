package usage

import (
	"strings"
	"testing"
)

func TestMediaParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		want int64
	}{
		{"text only", `{"model":"m","messages":[{"role":"user","content":"an image_url: {\"type\":\"image_url\"}"}]}`, 0},
		{"openai image", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type" : "image_url","image_url":{"url":"data:,"}}]}]}`, 1},
		{"responses image and file", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"},{"type":"input_file","file_id":"f"}]}]}`, 2},
		{"anthropic image and document", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AA"}},{"type":"document","source":{"type":"text","data":"d"}}]}]}`, 2},
		{"gemini parts", `{"contents":[{"parts":[{"inlineData":{"data":"AA"}},{"file_data":{"file_uri":"u"}},{"text":"inlineData"}]}]}`, 2},
		{"broken JSON", `{"type":"image_url`, 0},
		{"cut after the key", `{"type":`, 0},
		{"first member of the body", `{"type":"image_url","image_url":{"url":"data:,"}}`, 1},
		{"blanks before the key", "{\n  \"type\": \"image\", \"source\": {}}", 1},
		{"after another member", `{"image_url":{"url":"x"},"type":"image_url"}`, 1},
		{"gemini part after another member", `{"parts":[{"text":"x","inlineData":{"data":"AA"}}]}`, 1},
		{"cut at the key", `{"a":1,"type"`, 0},
		{"cut in blanks after the key", `{"type":   `, 0},
	} {
		if got := MediaParts([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestGeminiCandidates(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"contents":[]}`: 0,
		`{"generationConfig":{"candidateCount":8}}`:   8,
		`{"generation_config":{"candidate_count":3}}`: 3,
		`{"generationConfig":{"candidateCount":"8"}}`: 0,
		`{"generationConfig":{"candidateCount":-1}}`:  0,
		`{"generationConfig":{"candidateCount":1.5}}`: 0,
	} {
		if got := GeminiCandidates([]byte(body)); got != want {
			t.Errorf("%s: %d, want %d", body, got, want)
		}
	}
}

// BenchmarkMediaParts measures the estimate's scan of a 16 KiB chat body
// (the part of an estimate a request with budgets pays beyond Scan).
func BenchmarkMediaParts(b *testing.B) {
	body := []byte(`{"model":"glm-5","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1365) + `"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		MediaParts(body)
	}
}
