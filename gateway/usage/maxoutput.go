package usage

import "encoding/json"

// GeminiMaxOutput is the output bound of a Gemini request body (the model
// is the path's, so Scan does not read it):
// generationConfig.maxOutputTokens, or the proto JSON spelling
// generation_config.max_output_tokens, when it is a positive integer; 0
// otherwise (a budget reservation then assumes the settings'
// defaultOutputReserve, and the upstream judges the body).
func GeminiMaxOutput(b []byte) int64 {
	type config struct {
		Camel json.RawMessage `json:"maxOutputTokens"`
		Snake json.RawMessage `json:"max_output_tokens"`
	}
	var body struct {
		Camel *config `json:"generationConfig"`
		Snake *config `json:"generation_config"`
	}
	if json.Unmarshal(b, &body) != nil {
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
