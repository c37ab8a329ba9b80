package wsbridge_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/gateway/wsbridge"
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
			wsTurn(ctx, b, c, msg)
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
			httpTurn(ctx, b, client, r.srv.URL, body)
		}
		b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// wsTurn sends msg on c and reads the turn's messages to response.completed.
func wsTurn(ctx context.Context, b *testing.B, c *websocket.Conn, msg []byte) {
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(data, []byte(`"type":"response.completed"`)) {
			return
		}
		if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
			b.Fatalf("turn failed: %s", data)
		}
	}
}

// httpTurn posts body to base's /v1/responses and reads the whole stream.
func httpTurn(ctx context.Context, b *testing.B, client *http.Client, base string, body []byte) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", bytes.NewReader(body))
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

// benchChildEnv names the upstream URL of BenchmarkTurnGatewayCPU's child
// process: the test binary, run again, serves the bridge and the gateway
// alone, so that its CPU time is the gateway's and nothing else's.
const benchChildEnv = "WSBRIDGE_BENCH_UPSTREAM"

// serveBenchChild serves the rig's gateway behind the bridge on a loopback
// port, prints its URL and serves until standard input closes.
func serveBenchChild(upURL string) {
	if path := os.Getenv(benchChildEnv + "_PROFILE"); path != "" {
		// A CPU profile of the gateway process alone, for looking into the pair.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	gw, bridge := newGateway(upURL, rigOptions{}, nil, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: bridge, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	gw.Close()
}

// procCPU is the user and system CPU time of process pid so far, from
// /proc (clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	// The fields after the command name (which may hold spaces), from state on.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkTurnGatewayCPU is BenchmarkTurn's pair with the bridge and the
// gateway in a process of their own (the test binary run again): gw-cpu-µs/op
// is that process's CPU time per turn, the gateway's cost alone, while the
// client and the fake upstream run here. Run both in one sitting:
//
//	go test -run '^$' -bench BenchmarkTurnGatewayCPU -benchtime 3000x ./gateway/wsbridge/
func BenchmarkTurnGatewayCPU(b *testing.B) {
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 8})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	defer func() { _ = up.Close() }()
	ctx := b.Context()
	// measure runs turn b.N times against a gateway process of its own (each
	// side starts as fresh as the other) and reports that process's CPU.
	measure := func(b *testing.B, turn func(base string)) {
		pid, base := startBenchChild(b, upSrv.URL)
		turn(base) // connections open before the count starts
		start := procCPU(b, pid)
		for b.Loop() {
			turn(base)
		}
		b.ReportMetric(float64((procCPU(b, pid)-start).Microseconds())/float64(b.N), "gw-cpu-µs/op")
	}
	b.Run("websocket", func(b *testing.B) {
		var c *rawWS
		defer func() {
			if c != nil {
				_ = c.conn.Close()
			}
		}()
		msg := create(freeModel, "hi", benchInstructions)
		measure(b, func(base string) {
			if c == nil {
				c = dialRaw(b, base)
			}
			c.turn(b, msg)
		})
	})
	b.Run("http", func(b *testing.B) {
		tr := &http.Transport{DisableCompression: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		body := []byte(`{"model":"` + freeModel + `","input":[{"type":"message","role":"user","content":"hi"}]` + benchInstructions + `,"stream":true}`)
		measure(b, func(base string) { httpTurn(ctx, b, client, base, body) })
	})
}

// startBenchChild starts the test binary as a gateway process in front of
// upURL (serveBenchChild) and returns its pid and URL; it ends with b.
func startBenchChild(b *testing.B, upURL string) (int, string) {
	// Not CommandContext: the context ends before the cleanup, which lets the
	// child finish (its profile, when asked for) on standard input's end.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+upURL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("child: %v", err)
	}
	return cmd.Process.Pid, strings.TrimSpace(line)
}

// rawWS is a minimal WebSocket client for BenchmarkTurnGatewayCPU: it
// writes each message as one frame in one write, as Codex's client does
// (coder/websocket's client writes a large message in 4 KiB pieces, each a
// wake-up of the gateway's reader, which would be counted against the
// socket), and reads the server's unmasked frames.
type rawWS struct {
	conn net.Conn
	br   *bufio.Reader
	out  []byte
	in   []byte
}

func dialRaw(b *testing.B, base string) *rawWS {
	host := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n",
		wsbridge.Path, host, codexKey)
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		b.Fatalf("upgrade: %v %v", resp, err)
	}
	return &rawWS{conn: conn, br: br}
}

// turn sends msg and reads messages up to response.completed.
func (w *rawWS) turn(b *testing.B, msg []byte) {
	// A masked text frame; a zero masking key leaves the payload as it is.
	w.out = append(w.out[:0], 0x81)
	switch n := len(msg); {
	case n < 126:
		w.out = append(w.out, 0x80|byte(n))
	case n < 1<<16:
		w.out = append(w.out, 0x80|126, byte(n>>8), byte(n))
	default:
		w.out = append(w.out, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	w.out = append(w.out, 0, 0, 0, 0)
	w.out = append(w.out, msg...)
	if _, err := w.conn.Write(w.out); err != nil {
		b.Fatal(err)
	}
	for {
		var hdr [2]byte
		if _, err := io.ReadFull(w.br, hdr[:]); err != nil {
			b.Fatal(err)
		}
		n := int(hdr[1] & 0x7f)
		switch n {
		case 126:
			var ext [2]byte
			_, _ = io.ReadFull(w.br, ext[:])
			n = int(ext[0])<<8 | int(ext[1])
		case 127:
			var ext [8]byte
			_, _ = io.ReadFull(w.br, ext[:])
			n = 0
			for _, x := range ext {
				n = n<<8 | int(x)
			}
		}
		if cap(w.in) < n {
			w.in = make([]byte, n)
		}
		data := w.in[:n]
		if _, err := io.ReadFull(w.br, data); err != nil {
			b.Fatal(err)
		}
		if hdr[0]&0x0f != 1 {
			continue // not a text frame
		}
		if bytes.Contains(data, []byte(`"type":"response.completed"`)) {
			return
		}
		if bytes.HasPrefix(data, []byte(`{"type":"error"`)) {
			b.Fatalf("turn failed: %s", data)
		}
	}
}
