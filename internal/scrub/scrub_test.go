package scrub

import (
	"strings"
	"testing"
)

func TestSecretsRedactsCredentials(t *testing.T) {
	for _, tc := range []struct{ in, gone string }{
		{`{"error":{"message":"Incorrect API key provided: sk-proj-abcdef1234567890XYZ. You can find your API key at https://platform.openai.com"}}`, "sk-proj-abcdef1234567890XYZ"},
		{`Authorization: Bearer abc.def-ghi_123`, "abc.def-ghi_123"},
		{`header authorization="Basic dXNlcjpwYXNz"`, "dXNlcjpwYXNz"},
		{`GET /v1beta/models?key=AIzaSyA1234567890abcdefghijklmnopqrstu failed`, "AIzaSyA1234567890abcdefghijklmnopqrstu"},
		{`{"api_key": "hunter2hunter2"}`, "hunter2hunter2"},
		{`{"x-api-key":"plain-secret-value"}`, "plain-secret-value"},
		{`access_token=ya29.a0AfH6SMBx&x=1`, "ya29.a0AfH6SMBx"},
		{`token 0123456789abcdef0123456789abcdefXYZ was revoked`, "0123456789abcdef0123456789abcdefXYZ"},
		{`jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc invalid`, "eyJhbGciOiJIUzI1NiJ9"},
	} {
		got := Secrets(tc.in)
		if strings.Contains(got, tc.gone) || !strings.Contains(got, Redacted) {
			t.Errorf("Secrets(%q) = %q, still holds %q", tc.in, got, tc.gone)
		}
	}
}

func TestSecretsKeepsOrdinaryText(t *testing.T) {
	for _, in := range []string{
		`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min","type":"tokens","code":"rate_limit_exceeded"}}`,
		`upstream overloaded, request id 0b6b3c8e-6f3e-4bd1-9a4f-5e2f1d7c9a10`,
		`{"type":"error","error":{"type":"invalid_api_key","message":"invalid x-api-key"}}`,
		`model glm-4.7 is not available`,
	} {
		if got := Secrets(in); got != in {
			t.Errorf("Secrets(%q) = %q, want it unchanged", in, got)
		}
	}
}

func TestMessageCutsAt512Bytes(t *testing.T) {
	msg := strings.Repeat("é", 400) // 800 bytes
	got := Message([]byte(msg), nil)
	if len(got) > MaxMessage || len(got) < MaxMessage-1 || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("len %d, want the first 512 bytes on a rune boundary", len(got))
	}
}

func TestMessageDropsTheCredentialSent(t *testing.T) {
	cred := "zz-upstream-credential-value-42"
	got := Message([]byte(`{"error":"credential zz-upstream-credential-value-42 is not valid"}`), nil, "", cred)
	if strings.Contains(got, cred) || !strings.Contains(got, Redacted) {
		t.Fatalf("got %q", got)
	}
	// A message cut inside the credential keeps no part of it of 8 bytes or more.
	long := strings.Repeat("x", MaxMessage-12) + " " + cred
	got = Message([]byte(long), nil, cred)
	if strings.Contains(got, cred[:8]) {
		t.Fatalf("a cut credential left %q", got[len(got)-30:])
	}
}

func TestMessageDropsEchoOfTheRequestBody(t *testing.T) {
	prompt := "Please summarise the quarterly revenue figures for ACME Corp"
	body := []byte(`{"model":"glm-4.7","messages":[{"role":"user","content":"` + prompt + `"}]}`)
	msg := []byte(`{"error":{"message":"Content rejected: '` + prompt + `' violates policy","type":"invalid_request_error"}}`)
	got := Message(msg, body)
	if !strings.Contains(got, Echoed) || !strings.Contains(got, "violates policy") || !strings.Contains(got, "Content rejected") {
		t.Fatalf("got %q", got)
	}
	for i := 0; i+8 <= len(prompt); i++ {
		if strings.Contains(got, prompt[i:i+8]) {
			t.Fatalf("a fragment %q of the prompt is left in %q", prompt[i:i+8], got)
		}
	}
}

func TestMessageKeepsAMessageWithoutEcho(t *testing.T) {
	msg := `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error"}}`
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if got := Message([]byte(msg), body); got != msg {
		t.Fatalf("got %q, want %q", got, msg)
	}
}
