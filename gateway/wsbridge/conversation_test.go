package wsbridge

import (
	"encoding/json"
	"testing"
)

// A turn that continues the latest response by previous_response_id (the
// WebSocket mode sends only the new items then) goes upstream as the whole
// input: the latest turn's input, its output, the new items; a warm-up
// (generate:false) is answered here and can be continued the same way.
func TestContinuedTurnCarriesWholeInput(t *testing.T) {
	var cv conversation
	body, act, aerr := cv.prepare([]byte(`{"type":"response.create","model":"m","input":[{"role":"user","content":"a"}],"generate":false}`))
	if act != actWarmup || aerr != nil || body != nil {
		t.Fatalf("warm-up: %v %v %s", act, aerr, body)
	}
	msgs := cv.warmup(1)
	var done struct {
		Type     string
		Response struct{ ID string }
	}
	if err := json.Unmarshal(msgs[1], &done); err != nil || done.Type != "response.completed" || done.Response.ID == "" {
		t.Fatalf("warm-up answer %s: %v", msgs[1], err)
	}
	body = mustTurn(t, &cv, `{"type":"response.create","model":"m","previous_response_id":"`+done.Response.ID+`","input":[{"role":"user","content":"b"}]}`)
	if want := `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"stream":true}`; string(body) != want {
		t.Fatalf("after the warm-up: %s, want %s", body, want)
	}
	cv.completedEvent([]byte(`{"type":"response.completed","response":{"id":"resp_1","output":[{"type":"message","role":"assistant","content":"x"}]}}`))
	body = mustTurn(t, &cv, `{"type":"response.create","model":"m","previous_response_id":"resp_1","input":[{"role":"user","content":"c"}]}`)
	want := `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"type":"message","role":"assistant","content":"x"},{"role":"user","content":"c"}],"stream":true}`
	if string(body) != want {
		t.Fatalf("continued: %s, want %s", body, want)
	}
	// An id this socket did not answer is the upstream's to resolve.
	body = mustTurn(t, &cv, `{"type":"response.create","model":"m","previous_response_id":"resp_other","input":"d"}`)
	if want := `{"model":"m","previous_response_id":"resp_other","input":"d","stream":true}`; string(body) != want {
		t.Fatalf("unknown id: %s, want %s", body, want)
	}
}

// The message's members go upstream byte for byte, in order, without
// "type" and "generate"; "stream" is always true.
func TestTurnBodyKeepsMembers(t *testing.T) {
	var cv conversation
	got := mustTurn(t, &cv, `{ "type" : "response.create", "model":"m", "stream":false, "tools":[{"a":"\u00e9"}], "generate":true, "store":false }`)
	if want := `{"model":"m","tools":[{"a":"\u00e9"}],"store":false,"stream":true}`; string(got) != want {
		t.Fatalf("body %s, want %s", got, want)
	}
	for _, bad := range []string{`[1]`, `{"type":"response.create",}`, `{"type":"response.create"} x`, `{"type":7}`} {
		if _, act, aerr := cv.prepare([]byte(bad)); act != actRefuse || aerr == nil || aerr.Code != "INVALID_REQUEST" {
			t.Errorf("%s: %v %v, want refused INVALID_REQUEST", bad, act, aerr)
		}
	}
}

func mustTurn(t *testing.T, cv *conversation, msg string) []byte {
	t.Helper()
	body, act, aerr := cv.prepare([]byte(msg))
	if act != actTurn || aerr != nil {
		t.Fatalf("%s: %v %v", msg, act, aerr)
	}
	return body
}
