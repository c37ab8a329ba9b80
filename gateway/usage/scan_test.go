package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScanBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		wantModel  string
		wantStream bool
		wantErr    error
	}{
		{name: "simple", body: `{"model":"glm-5","messages":[]}`, wantModel: "glm-5"},
		{name: "stream true", body: `{"stream":true,"model":"glm-5"}`, wantModel: "glm-5", wantStream: true},
		{name: "stream false", body: `{"model":"m","stream":false}`, wantModel: "m"},
		{name: "whitespace", body: " \n{ \"model\" : \"a/b\" , \"stream\" : true }\n", wantModel: "a/b", wantStream: true},
		{name: "nested model ignored", body: `{"x":{"model":"no"},"model":"yes","y":[{"model":"no"}]}`, wantModel: "yes"},
		{name: "escaped value", body: `{"model":"gl\u006d-5"}`, wantModel: "glm-5"},
		{name: "escaped key", body: `{"mod\u0065l":"glm-5"}`, wantModel: "glm-5"},
		{name: "strings with braces", body: `{"messages":[{"content":"}{\"model\":\"no\""}],"model":"yes"}`, wantModel: "yes"},
		{name: "numbers and literals", body: `{"t":-1.5e3,"n":null,"b":false,"model":"m"}`, wantModel: "m"},
		{name: "no model", body: `{"messages":[]}`, wantErr: ErrNoModel},
		{name: "empty object", body: `{}`, wantErr: ErrNoModel},
		{name: "model number", body: `{"model":5}`, wantErr: ErrNoModel},
		{name: "empty model", body: `{"model":""}`, wantErr: ErrNoModel},
		{name: "array", body: `[{"model":"m"}]`, wantErr: ErrNotObject},
		{name: "duplicate", body: `{"model":"a","model":"b"}`, wantErr: ErrDupModel},
		{name: "upper case after", body: `{"model":"cheap-m","MODEL":"premium-m"}`, wantErr: ErrFoldedModel},
		{name: "title case before", body: `{"Model":"premium-m","model":"cheap-m"}`, wantErr: ErrFoldedModel},
		{name: "mixed case alone", body: `{"mOdEl":"premium-m"}`, wantErr: ErrFoldedModel},
		{name: "escaped upper case", body: `{"model":"a","\u004dODEL":"b"}`, wantErr: ErrFoldedModel},
		{name: "folded key of any type", body: `{"model":"a","Model":5}`, wantErr: ErrFoldedModel},
		{name: "longer key kept", body: `{"model":"a","Models":"b","model_x":1}`, wantModel: "a"},
		{name: "nested folded key ignored", body: `{"model":"a","x":{"MODEL":"b"}}`, wantModel: "a"},
		{name: "truncated", body: `{"model":"m","messages":[`, wantErr: ErrSyntax},
		{name: "trailing garbage", body: `{"model":"m"}x`, wantErr: ErrSyntax},
		{name: "bad literal", body: `{"model":"m","x":tru}`, wantErr: ErrSyntax},
		{name: "control char", body: "{\"model\":\"a\nb\"}", wantErr: ErrSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Scan([]byte(tc.body))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if info.Model != tc.wantModel || info.Stream != tc.wantStream {
				t.Errorf("got model %q stream %v, want %q %v", info.Model, info.Stream, tc.wantModel, tc.wantStream)
			}
		})
	}
}

// TestScanMaxOutput: the output bound is the largest positive integer of the
// fields that set one; other values are no bound.
func TestScanMaxOutput(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"model":"m"}`:                                                            0,
		`{"model":"m","max_tokens":150}`:                                           150,
		`{"max_completion_tokens":77,"model":"m"}`:                                 77,
		`{"model":"m","max_output_tokens":9,"max_tokens":12}`:                      12,
		`{"model":"m","generationConfig":{"temperature":1,"maxOutputTokens":300}}`: 300,
		`{"model":"m","x":{"max_tokens":5}}`:                                       0,
		`{"model":"m","max_tokens":1.5}`:                                           0,
		`{"model":"m","max_tokens":-3}`:                                            0,
		`{"model":"m","max_tokens":"100"}`:                                         0,
		`{"model":"m","max_tokens":0}`:                                             0,
		`{"model":"m","generationConfig":[1]}`:                                     0,
	} {
		info, err := Scan([]byte(body))
		if err != nil || info.MaxOutput != want {
			t.Errorf("Scan(%s): MaxOutput %d, err %v; want %d", body, info.MaxOutput, err, want)
		}
	}
}

func TestRewriteModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, model, want string
	}{
		{name: "alias", body: `{"model":"zai/glm-5","messages":[{"content":"zai/glm-5"}]}`, model: "glm-5",
			want: `{"model":"glm-5","messages":[{"content":"zai/glm-5"}]}`},
		{name: "keeps spacing", body: "{ \"stream\": true,\n  \"model\" :  \"p/x\" }", model: "x",
			want: "{ \"stream\": true,\n  \"model\" :  \"x\" }"},
		{name: "quotes", body: `{"model":"p/a"}`, model: `a"b`, want: `{"model":"a\"b"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Scan([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got := string(rewriteModel(nil, []byte(tc.body), info, tc.model))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rewrite mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzScanBody checks the scanner against encoding/json: whenever the body
// is a valid JSON object, the scanner finds the same model and stream, and
// rewriting the model yields valid JSON with only that value changed.
func FuzzScanBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"glm-5","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"model":"a\u00e9\"b","x":[1,2,{"y":null}]}`,
		`{"stream":false,"model":"p/m"}`,
		`{}`, `[]`, `{"model":1}`, `{"model":"m"} `,
		`{"model":"cheap-m","MODEL":"premium-m"}`, `{"Model":"x","model":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := Scan(body)
		var doc map[string]json.RawMessage
		if json.Unmarshal(body, &doc) != nil || !json.Valid(body) {
			return // the scanner may accept some invalid JSON; upstream rejects it
		}
		var model string
		modelErr := json.Unmarshal(doc["model"], &model)
		if err != nil {
			if modelErr == nil && model != "" && !errors.Is(err, ErrDupModel) && !errors.Is(err, ErrFoldedModel) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Scan(%q) = %v, but encoding/json reads model %q", body, err, model)
			}
			return
		}
		if info.Model != model {
			t.Fatalf("model %q, encoding/json says %q", info.Model, model)
		}
		// What an upstream decoding into a struct (keys matched without
		// regard to case) would serve is the model the scanner found.
		var upstream struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &upstream) == nil && upstream.Model != info.Model {
			t.Fatalf("Scan(%q) found model %q, a case-insensitive decoder serves %q", body, info.Model, upstream.Model)
		}
		var stream bool
		_ = json.Unmarshal(doc["stream"], &stream)
		if info.Stream != stream && doc["stream"] != nil && string(doc["stream"]) != "null" {
			t.Fatalf("stream %v, encoding/json says %s", info.Stream, doc["stream"])
		}
		out := rewriteModel(nil, body, info, "new/model\"x")
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("rewrite made invalid JSON %q: %v", out, err)
		}
		var got string
		_ = json.Unmarshal(after["model"], &got)
		if got != "new/model\"x" {
			t.Fatalf("rewritten model %q", got)
		}
		if !bytes.Equal(out[:info.modelStart], body[:info.modelStart]) {
			t.Fatal("rewrite changed bytes before the model")
		}
	})
}

// TestScanParts: the scan marks the system prompt, tools and first message
// and reads the body's session ids, without decoding the conversation.
func TestScanParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                         string
		body                         string
		system, tools, first         string
		promptCacheKey, metadataUser string
		multiTurn                    bool
	}{
		{name: "anthropic", body: `{"model":"m","system":[{"type":"text","text":"sys"}],"tools":[{"name":"bash"}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}],"metadata":{"x":1,"user_id":"user_abc_session_1"}}`,
			system: `[{"type":"text","text":"sys"}]`, tools: `[{"name":"bash"}]`, first: `{"role":"user","content":"hi"}`, metadataUser: "user_abc_session_1", multiTurn: true},
		{name: "openai chat", body: `{"messages":[ {"role":"system","content":"s"} , {"role":"user","content":"u"} ],"model":"m","prompt_cache_key":"pck-1"}`,
			first: `{"role":"system","content":"s"}`, promptCacheKey: "pck-1", multiTurn: true},
		{name: "responses", body: `{"model":"m","instructions":"be brief","input":"hello"}`, system: `"be brief"`, first: `"hello"`},
		{name: "responses array", body: `{"model":"m","input":[{"role":"user","content":"a"}]}`, first: `{"role":"user","content":"a"}`},
		{name: "empty messages", body: `{"model":"m","messages":[]}`},
		{name: "metadata without user", body: `{"model":"m","metadata":{"user":"x"}}`},
		{name: "non-string session ids", body: `{"model":"m","prompt_cache_key":5,"metadata":{"user_id":7}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			info, err := Scan(b)
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			sys, tools, first := info.Parts(b)
			got := []string{string(sys), string(tools), string(first), info.PromptCacheKey, info.MetadataUserID, strconv.FormatBool(info.MultiTurn)}
			want := []string{tc.system, tc.tools, tc.first, tc.promptCacheKey, tc.metadataUser, strconv.FormatBool(tc.multiTurn)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parts mismatch (-want +got):\n%s", diff)
			}
			// A part the request lacks is nil, not empty: affinity tells
			// them apart.
			for i, part := range [][]byte{sys, tools, first} {
				if (part == nil) != (want[i] == "") {
					t.Errorf("part %d = %q (nil %v), want nil only when absent", i, part, part == nil)
				}
			}
		})
	}
	for _, bad := range []string{`{"model":"m","messages":[{"role":}]}`, `{"model":"m","messages":[1,]}`, `{"model":"m","tools":[}`} {
		if _, err := Scan([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Scan(%s) = %v, want ErrSyntax", bad, err)
		}
	}
}

// TestScanLastTwo: the scan marks the last two messages of the conversation
// (the session guard compares them to spot a client in a loop), nil for
// those the request lacks: a request without them must not read as one
// whose messages are empty.
func TestScanLastTwo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		prev, last string // "": nil
	}{
		{name: "three messages", body: `{"model":"m","messages":[{"n":1},{"n":2},{"n":3}]}`, prev: `{"n":2}`, last: `{"n":3}`},
		{name: "two messages, spaced", body: `{"messages":[ {"n":1} , "two" ],"model":"m"}`, prev: `{"n":1}`, last: `"two"`},
		{name: "one message", body: `{"model":"m","messages":[{"n":1}]}`, last: `{"n":1}`},
		{name: "input array", body: `{"model":"m","input":[[1],[2]]}`, prev: `[1]`, last: `[2]`},
		{name: "input string", body: `{"model":"m","input":"hello"}`},
		{name: "empty messages", body: `{"model":"m","messages":[]}`},
		{name: "no messages", body: `{"model":"m"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			info, err := Scan(b)
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			prev, last := info.LastTwo(b)
			for _, p := range []struct {
				name string
				got  []byte
				want string
			}{{"prev", prev, tc.prev}, {"last", last, tc.last}} {
				if string(p.got) != p.want || (p.got == nil) != (p.want == "") {
					t.Errorf("%s = %q (nil %v), want %q (nil only when absent)", p.name, p.got, p.got == nil, p.want)
				}
			}
		})
	}
}
