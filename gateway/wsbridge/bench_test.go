package wsbridge_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// benchInstructions makes a turn the size of a coding agent's (about 32 KiB
// of instructions), which the bridge copies into the turn's body.
var benchInstructions = `,"instructions":"` + strings.Repeat("You are a coding agent. ", 1400) + `"`

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTurn is one streaming Responses turn, one at a time, over the
// WebSocket ("websocket": one socket, a response.create per turn) and the
// same request over HTTP ("http": POST /v1/responses with stream:true on a
// kept-alive connection), both through the bridge and the gateway to the
// fake upstream. Client, gateway and upstream share this process, so
// cpu-µs/op is all three: the upstream's part is the same in both, the
// client's differs by its transport. Run both in one sitting:
//
//	go test -run '^$' -bench BenchmarkTurn -benchtime 2000x ./gateway/wsbridge/
func BenchmarkTurn(b *testing.B) {
	r := newRig(b, rigOptions{up: upstreamtest.Options{Chunks: 8}})
	ctx := b.Context()
	b.Run("websocket", func(b *testing.B) {
		c := r.dial(ctx, codexKey)
		defer func() { _ = c.CloseNow() }()
		msg := create(freeModel, "hi", benchInstructions)
		start := cpuTime(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
				b.Fatal(err)
			}
			for {
				_, data, err := c.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Contains(data, []byte(`"type":"response.completed"`)) {
					break
				}
				if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
					b.Fatalf("turn failed: %s", data)
				}
			}
		}
		b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	})
	b.Run("http", func(b *testing.B) {
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		body := []byte(`{"model":"` + freeModel + `","input":[{"type":"message","role":"user","content":"hi"}]` + benchInstructions + `,"stream":true}`)
		start := cpuTime(b)
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/v1/responses", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+codexKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"type":"response.completed"`)) {
				b.Fatalf("status %d, %v: %.200s", resp.StatusCode, err, out)
			}
		}
		b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}
